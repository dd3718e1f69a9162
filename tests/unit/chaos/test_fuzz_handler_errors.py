"""The fuzzer reads the brokers' logs for handlers' unexpected errors: only what was logged after the run began,
counted by the exception's last line."""

from __future__ import annotations

from pathlib import Path

from insync.chaos.fuzz import HANDLER_ERROR, handler_errors

TRACE = """[2026-11-30 07:55:15,884] ERROR Error handling a request from 127.0.0.1:57628; closing the connection (x)
Traceback (most recent call last):
  File "/src/insync/server/listener.py", line 204, in _serve_connection
    await self._serve(reader, writer, session)

AssertionError: (0, -1)
[2026-11-30 07:55:15,900] WARN Closing connection from 127.0.0.1:1: malformed request (insync.server)
"""


def test_errors_after_the_start_are_counted_by_their_last_line(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    before = TRACE.replace("(0, -1)", "(before the run)")
    log.write_text(before)
    log.write_text(before + TRACE + TRACE.replace("AssertionError: (0, -1)", "TypeError: None"))
    assert HANDLER_ERROR in TRACE
    assert handler_errors({log: len(before)}) == {"AssertionError: (0, -1)": 1, "TypeError: None": 1}
    assert handler_errors({log: log.stat().st_size}) == {}
