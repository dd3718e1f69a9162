"""Kafka's length-prefixed framing, sans-IO.

Every Kafka request and response is a 4-byte big-endian size followed by that many bytes. `FrameDecoder` takes
bytes as they arrive (`feed`) and yields complete frames; it never holds more than one frame plus one read's
worth of bytes. A declared size above `max_frame_bytes` (`socket.request.max.bytes`) or below the smallest
possible request header raises `FrameError` before any of the body is buffered: Kafka closes such connections,
and so does the server on this error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

_SIZE = struct.Struct(">i")
SIZE_PREFIX_BYTES = 4
MIN_REQUEST_BYTES = 8  # api key (2) + api version (2) + correlation id (4)


class FrameError(Exception):
    """The peer sent a frame that cannot be a Kafka request: the connection must be closed."""


class FrameDecoder:
    def __init__(self, max_frame_bytes: int, min_frame_bytes: int = MIN_REQUEST_BYTES) -> None:
        assert max_frame_bytes >= min_frame_bytes >= 0
        self.max_frame_bytes = max_frame_bytes
        self.max_frame_setting = "socket.request.max.bytes"  # what the bound is called, for the error
        self.min_frame_bytes = min_frame_bytes
        self._buffer = bytearray()
        self._frame_size: int | None = None

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[bytes]:
        """Add received bytes; yield every frame they complete, in order."""
        self._buffer += data
        while True:
            if self._frame_size is None:
                if len(self._buffer) < SIZE_PREFIX_BYTES:
                    return
                (size,) = _SIZE.unpack_from(self._buffer, 0)
                if size > self.max_frame_bytes:
                    raise FrameError(f"frame of {size} bytes exceeds {self.max_frame_setting} ({self.max_frame_bytes})")
                if size < self.min_frame_bytes:
                    raise FrameError(f"frame of {size} bytes is smaller than a request header")
                self._frame_size = size
                del self._buffer[:SIZE_PREFIX_BYTES]
            if len(self._buffer) < self._frame_size:
                return
            with memoryview(self._buffer) as view:  # one copy (a bytearray slice would be a second)
                frame = bytes(view[: self._frame_size])
            del self._buffer[: self._frame_size]
            self._frame_size = None
            yield frame


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix `payload` with its size."""
    return _SIZE.pack(len(payload)) + bytes(payload)
