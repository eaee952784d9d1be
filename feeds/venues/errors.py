"""Map the ways a frame can fail to decode onto ParseError reasons (metric labels)."""
from __future__ import annotations

import msgspec

from feeds.market import FixedPointError
from feeds.venues.base import ParseError

# What a parser may raise while decoding a hostile frame; `parse` turns each into a
# ParseError so nothing else escapes into the stream.
DECODE_FAILURES: tuple[type[Exception], ...] = (
    msgspec.DecodeError, ValueError, OverflowError, TypeError, KeyError, IndexError, UnicodeError,
)


def as_parse_error(exc: Exception) -> ParseError:
    """Return `exc` as a ParseError whose reason says what kind of failure it was."""
    if isinstance(exc, ParseError):
        return exc
    if isinstance(exc, msgspec.ValidationError):  # a subclass of DecodeError: test it first
        return ParseError("schema", str(exc))
    if isinstance(exc, msgspec.DecodeError):
        return ParseError("json", str(exc))
    if isinstance(exc, FixedPointError):
        return ParseError("number", str(exc))
    return ParseError("value", f"{type(exc).__name__}: {exc}")
