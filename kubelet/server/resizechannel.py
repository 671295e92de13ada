"""The resize channel of an exec or attach with a tty: a stream of JSON terminal sizes.

Each message is ``{"Width": w, "Height": h}`` (missing members are 0), one after another
with optional whitespace, cut into WebSocket frames anywhere. As upstream's translator
(a ``json.Decoder`` on the stream, stopping at its first error), the first message that
does not decode to such an object ends resizing for the session; the session itself
goes on. What the client controls is bounded: a message is at most
:data:`MAX_RESIZE_MESSAGE` bytes (a real one is about 30), a decode is tried only when a
``}`` arrives (an object can end nowhere else), and nesting too deep for the decoder
is a bad message, not an error of the session. So each byte costs a bounded amount
of work, however the client cuts or pads its messages.
"""

from __future__ import annotations

import json

MAX_RESIZE_MESSAGE = 4 << 10
"""A resize message still unfinished after this many bytes ends resizing."""
MAX_DIMENSION = 0xFFFF
"""Widths and heights are 16-bit (the terminal's ``winsize``)."""
_JSON_SPACE = b" \t\r\n"


class ResizeDecoder:
    """Feed it the channel's bytes; it returns the sizes they complete."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self.ended = False
        """A bad message came: nothing more is decoded."""

    def feed(self, data: bytes) -> list[tuple[int, int]]:
        if self.ended:
            return []
        self._buffer += data
        sizes = self._decode() if b"}" in data else []
        self._buffer = self._buffer.lstrip(_JSON_SPACE)
        first = bytes(self._buffer[:1])
        if first not in (b"", b"{") or len(self._buffer) > MAX_RESIZE_MESSAGE:
            self.ended = True  # not an object, or one that never ends
        if self.ended:
            self._buffer = bytearray()
        return sizes

    def _decode(self) -> list[tuple[int, int]]:
        """The complete messages at the buffer's start; the rest stays for later."""
        text = self._buffer.decode(errors="replace")
        decoder = json.JSONDecoder()
        sizes: list[tuple[int, int]] = []
        at = 0
        while True:
            while at < len(text) and text[at] in " \t\r\n":
                at += 1
            if at >= len(text):
                break
            try:
                value, at = decoder.raw_decode(text, at)
            except RecursionError:
                self.ended = True
                return sizes
            except ValueError:
                break  # unfinished (or bad: then it never finishes, and the bound ends it)
            size = _size(value)
            if size is None:
                self.ended = True
                return sizes
            sizes.append(size)
        self._buffer = bytearray(text[at:].encode())
        return sizes


def _size(value: object) -> tuple[int, int] | None:
    """(width, height) of a decoded message, or None for one that is not a size."""
    if not isinstance(value, dict):
        return None
    width, height = value.get("Width", 0), value.get("Height", 0)
    for v in (width, height):
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_DIMENSION:
            return None
    return width, height
