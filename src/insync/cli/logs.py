"""Where the commands send log lines that would bury their own output: the Kafka clients' and the brokers'."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def client_log(path: Path) -> Iterator[None]:
    """The Kafka clients log to `path`: the demo's acts and the seed scenarios pause and kill brokers, and the
    clients' resulting connection errors on the terminal would bury the story the command tells."""
    from insync.chaos.history import CLIENT_LOGGER

    logger = logging.getLogger(CLIENT_LOGGER)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        handler.close()


def quiet_logs(level: int) -> None:
    """Brokers log what Kafka logs (under Kafka's logger names, and insync's); a simulation's result says it
    all, so only --verbose shows them."""
    for name in ("insync", "kafka"):
        logging.getLogger(name).setLevel(level)
