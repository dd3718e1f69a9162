"""Halting a broker whose log directories have all failed, as Kafka's `Exit.halt(1)`: at once, without the clean
shutdown (which would flush and checkpoint onto the failed directory) and without waiting for requests in flight,
so nothing the broker could not write is ever acknowledged. The controller fences it when its session runs out.
"""

from __future__ import annotations

import logging
import os

from insync.broker.core import BrokerCore

log = logging.getLogger("insync.broker")

HALT_STATUS = 1  # Kafka's


def halt_if_failed(core: BrokerCore) -> None:
    message = core.halt_message
    if message is None:
        return
    log.critical(message)
    logging.shutdown()  # flush the line above to every handler (server.log only if its disk still takes it)
    os._exit(HALT_STATUS)
