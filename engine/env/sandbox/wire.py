"""Frames between the env actor and its sandbox processes: a 4-byte big-endian length, then the body.

Stdlib only (the sandbox process imports it). The actor sends ``marshal`` bodies (the child trusts
the actor: they carry compiled code objects); the child answers in JSON, the only format the actor
parses from a process that runs untrusted code, and never more than :data:`MAX_FRAME` bytes.
"""

from __future__ import annotations

import struct

__all__ = ["MAX_FRAME", "FrameBuffer", "FrameTooLargeError", "frame"]

#: Largest body either side accepts (results and printed output are capped far below this).
MAX_FRAME = 8 * 2**20
_HEADER = struct.Struct(">I")


class FrameTooLargeError(ValueError):
    """A frame announced a body larger than :data:`MAX_FRAME`."""


def frame(body: bytes) -> bytes:
    """``body`` with its length header.

    Raises:
        FrameTooLargeError: the body is larger than :data:`MAX_FRAME`.
    """
    if len(body) > MAX_FRAME:
        raise FrameTooLargeError(f"a frame of {len(body)} bytes (limit {MAX_FRAME})")
    return _HEADER.pack(len(body)) + body


class FrameBuffer:
    """Collects bytes as they arrive and cuts them into frame bodies (sans-IO)."""

    def __init__(self) -> None:
        self._data = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add ``chunk``; return the bodies it completed, in order.

        Raises:
            FrameTooLargeError: a header announced a body larger than :data:`MAX_FRAME`.
        """
        self._data += chunk
        bodies = []
        while len(self._data) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._data)
            if size > MAX_FRAME:
                raise FrameTooLargeError(f"a frame of {size} bytes (limit {MAX_FRAME})")
            end = _HEADER.size + size
            if len(self._data) < end:
                break
            bodies.append(bytes(self._data[_HEADER.size : end]))
            del self._data[:end]
        return bodies
