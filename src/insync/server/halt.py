"""Halting a broker whose log directories have all failed, as Kafka's `Exit.halt(1)`: without the clean shutdown
(which would flush and checkpoint onto the failed directory), so nothing the broker could not write is ever
acknowledged; the controller fences it when its session runs out. Kafka halts from its log-dir failure thread
while the request that met the error is answered KAFKA_STORAGE_ERROR; here the halt comes `HALT_AFTER_S` after
the failure, so the answers already decided reach their clients first (every write in between is refused: the
directory is offline).
"""

from __future__ import annotations

import asyncio
import logging
import os

from insync.broker.core import BrokerCore

log = logging.getLogger("insync.broker")

HALT_STATUS = 1  # Kafka's
HALT_AFTER_S = 0.1


class Halter:
    def __init__(self) -> None:
        self.scheduled = False

    def check(self, core: BrokerCore) -> None:
        """Schedule the halt once `core` says every log directory has failed."""
        message = core.halt_message
        if message is None or self.scheduled:
            return
        self.scheduled = True
        log.critical(message)
        asyncio.get_running_loop().call_later(HALT_AFTER_S, _halt)


def _halt() -> None:
    logging.shutdown()  # flush the lines above to every handler (server.log only if its disk still takes it)
    os._exit(HALT_STATUS)
