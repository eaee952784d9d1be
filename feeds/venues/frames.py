"""Recorded frames as text lines: one frame per line, base64 for binary venues (Upstox)."""

from __future__ import annotations

import base64
import binascii

from feeds.venues.base import ParseError, Venue


def is_binary(venue: Venue) -> bool:
    """Return whether the venue's frames are binary (recorded as base64 lines)."""
    return bool(getattr(venue, "binary_frames", False))


def frame_from_line(venue: Venue, line: str | bytes) -> bytes:
    """Return the frame a recorded line holds; raise ParseError for bad base64.

    A line read as bytes stays bytes: a frame that is not UTF-8 reaches the parser as
    the venue sent it, which refuses it with a reason.
    """
    raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
    raw = raw.rstrip(b"\r\n")
    if not is_binary(venue):
        return raw
    try:
        return base64.b64decode(raw.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ParseError("base64", str(exc)) from None


def line_from_frame(venue: Venue, frame: bytes) -> str:
    """Return the text line that records `frame`."""
    return base64.b64encode(frame).decode() if is_binary(venue) else frame.decode()
