"""Coverage-guided fuzzing (atheris, libFuzzer) of the decoders a broker runs on bytes from the network: the
length-prefixed framing, request headers and bodies (`decode_request`), and record batches (header, CRC,
records, decompression, a produce request's validation). Each target runs in its own process for
`SECONDS_PER_TARGET` from a fixed seed; anything but the decoder's own error (`FrameError`, `MalformedRequest`,
`UnsupportedRequest`, `InvalidRecordError`) is a crash libFuzzer reports with the input that caused it. Record
inputs get a correct CRC written in half the time, so mutations reach the records behind it.

Run one target by hand: `python tests/unit/protocol/test_codec_atheris.py records -max_total_time=60`.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

import pytest

TARGETS = ("framing", "requests", "records")
SECONDS_PER_TARGET = 10
STARTUP_ALLOWANCE_S = 300  # instrumenting the modules takes over a minute on two loaded cores
MAX_FRAME_BYTES = 1 << 20
CHUNKS_MAX = 16


@pytest.mark.slow
@pytest.mark.timeout(SECONDS_PER_TARGET + STARTUP_ALLOWANCE_S + 60)
@pytest.mark.parametrize("target", TARGETS)
def test_decoder_survives_coverage_guided_fuzzing(target: str, tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    command = [sys.executable, __file__, target, f"-max_total_time={SECONDS_PER_TARGET}", "-seed=1",
               "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS_PER_TARGET + STARTUP_ALLOWANCE_S,
                            check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Done" in result.stderr, result.stderr[-2000:]


def _fuzz_framing(data: bytes) -> None:
    from insync.protocol.framing import FrameDecoder, FrameError

    decoder = FrameDecoder(MAX_FRAME_BYTES)
    # The first byte splits the rest into reads of varied sizes, as a socket delivers them.
    step = max(1, data[0] if data else 1)
    try:
        for start in range(1, len(data), step)[:CHUNKS_MAX]:
            for frame in decoder.feed(data[start:start + step]):
                assert 8 <= len(frame) <= MAX_FRAME_BYTES
            assert decoder.buffered_bytes <= MAX_FRAME_BYTES + step
    except FrameError:
        pass


def _fuzz_requests(data: bytes) -> None:
    from insync.protocol.codec import MalformedRequest, UnsupportedRequest, decode_request
    from insync.wire.versions import BROKER_API_VERSIONS

    try:
        request = decode_request(data, BROKER_API_VERSIONS)
    except (MalformedRequest, UnsupportedRequest):
        return
    low, high = BROKER_API_VERSIONS[request.api_key]
    assert low <= request.api_version <= high


def _fuzz_records(data: bytes) -> None:
    from crc32c import crc32c

    from insync.protocol.compression import InvalidRecordError
    from insync.protocol.records import decode_records, iter_batches, scan_valid_prefix, validate_batches

    buf = bytearray(data[1:])
    if data and data[0] & 1 and len(buf) >= 61:
        buf[17:21] = crc32c(bytes(buf[21:])).to_bytes(4, "big")
    scan_valid_prefix(bytes(buf))
    try:
        for pos, _ in iter_batches(bytes(buf)):
            decode_records(bytes(buf), pos)
    except InvalidRecordError:
        pass
    with contextlib.suppress(InvalidRecordError):
        validate_batches(bytes(buf), max_message_bytes=MAX_FRAME_BYTES)


def _main() -> None:
    import atheris

    target = sys.argv.pop(1)
    assert target in TARGETS, target
    with atheris.instrument_imports(include=["insync"]):  # kio's reader is native code: no coverage to add
        import insync.protocol.codec
        import insync.protocol.compression
        import insync.protocol.framing
        import insync.protocol.records  # noqa: F401
    one_input = {"framing": _fuzz_framing, "requests": _fuzz_requests, "records": _fuzz_records}[target]
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    _main()
