"""A quix-streams word count (run by test_quix_streams.py in quix-streams' own venv, not insync's): each record's
key is a word; the count per word lives in a RocksDB store backed by a compacted changelog topic, and each new
count goes to the output topic, exactly once (quix-streams' transactions).

Usage: quix_wordcount.py BOOTSTRAP STATE_DIR INPUT OUTPUT
"""

from __future__ import annotations

import sys
from typing import Any

from quixstreams import Application, State


def main(bootstrap: str, state_dir: str, source: str, sink: str) -> None:
    app = Application(broker_address=bootstrap, consumer_group="quix-wordcount", auto_offset_reset="earliest",
                      state_dir=state_dir, processing_guarantee="exactly-once", commit_interval=0.5,
                      loglevel="WARNING")
    words = app.topic(source, key_deserializer="str", value_deserializer="str")
    counts = app.topic(sink, key_serializer="str", value_serializer="json")

    def count(word: str, state: State) -> dict[str, Any]:
        seen = int(state.get("count", 0)) + 1
        state.set("count", seen)
        return {"word": word, "count": seen}

    app.dataframe(words).apply(count, stateful=True).to_topic(counts)
    app.run()


if __name__ == "__main__":
    main(*sys.argv[1:5])
