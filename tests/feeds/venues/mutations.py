"""Seeded mutation of recorded frames: hostile variants of every venue's golden frames.

`mutated_frames(venue, count, seed)` yields `(mutation class, frame)` pairs, the classes
taken in turn so each gets an equal share, every choice drawn from one seeded
`random.Random`: the same venue, count and seed give the same frames, always, so a
failure is reproduced by its seed and index alone. No shrinking: the bulk run is about
volume, and a failing frame is printed whole.

The classes (MUTATIONS) and what they do to a frame:

    deep_nesting         a value (or the frame) replaced by brackets or objects 129..4000 deep
    out_of_range_number  a number replaced by one beyond every range (1e400, 2**64, 11+ whole digits)
    invalid_utf8         bytes that are not UTF-8 inside a string, or anywhere in the frame
    non_positive_price   a price (a number) set to zero or below
    negative_size        a quantity set below zero
    empty_symbol         the symbol (or the channel/topic naming it) emptied
    truncation           the frame cut short
    byte_flip            one to four bytes changed
    type_swap            a value replaced by one of another type (list, object, bool, null, ...)

Text venues are mutated as JSON trees (replay as CSV columns); Upstox as protobuf
messages, with the byte-level classes on the serialized frame.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import orjson
from upstox_client.feeder.proto import MarketDataFeedV3_pb2 as pb

from tests.feeds.venues import golden

MUTATIONS = (
    "deep_nesting",
    "out_of_range_number",
    "invalid_utf8",
    "non_positive_price",
    "negative_size",
    "empty_symbol",
    "truncation",
    "byte_flip",
    "type_swap",
)

_BAD_UTF8 = (
    b"\xff",
    b"\xfe\xff",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xf8\x88\x80\x80\x80",
    b"\x80",
    b"\xe2\x82",
)
_DEPTHS = (129, 513, 1000, 4000)
_NUMERIC_TEXT = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
# As JSON tokens: each is outside the range of any price, size or time.
_OUT_OF_RANGE = (
    b"1e400",
    b"-1e400",
    b"99999999999.99999999",
    b"100000000000",
    b"9223372036854775808",
    b"18446744073709551617",
    b"-9223372036854775809",
    b"1" + b"0" * 30,
    b"1" * 400,
    b"0.0000000000000000000000001",
    b"9.3e18",
    b"92233720368.54775808",
)
_NON_POSITIVE = ("0", "-1", "-0.00000001", "0.0", "-0", "-96712.4")
_NEGATIVE = ("-1", "-0.001", "-0.00000001", "-1000000")
_OTHER_TYPES: tuple[Any, ...] = ([], {}, "", "x", 0, 1.5, True, False, None, "1", [1], {"a": 1}, "[]")
_PRICE_KEYS = frozenset(
    {
        "p",
        "price",
        "markPrice",
        "indexPrice",
        "i",
        "b",
        "a",
        "bestBidPrice",
        "bestAskPrice",
        "ltp",
        "best_bid",
        "best_ask",
    }
)
_SIZE_KEYS = frozenset({"q", "size", "B", "A", "bestBidSize", "bestAskSize", "volume", "nq"})
_SYMBOL_KEYS = frozenset({"s", "symbol", "product_code", "channel", "topic"})

_SENTINEL = "\x01MUT\x01"
_SENTINEL_JSON = orjson.dumps(_SENTINEL)

Path = tuple[Any, ...]


# --- JSON venues --------------------------------------------------------------------------


def _leaves(node: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every node with its path, the root included."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, path + (index,))


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or (isinstance(value, str) and bool(_NUMERIC_TEXT.fullmatch(value)))


def _set(root: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    node = root
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return root


class _JsonFrame:
    """One golden JSON frame, its nodes indexed once so each mutation is a lookup and a dump."""

    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        self.nodes = list(_leaves(orjson.loads(frame)))
        self.numbers = [path for path, value in self.nodes if path and _is_number(value)]
        self.strings = [path for path, value in self.nodes if path and isinstance(value, str)]
        self.prices = [path for path in self.numbers if path[-1] in _PRICE_KEYS] or self.numbers
        self.sizes = [path for path in self.numbers if path[-1] in _SIZE_KEYS] or self.numbers
        self.symbols = [path for path in self.strings if path[-1] in _SYMBOL_KEYS] or self.strings
        self._values = dict(self.nodes)

    def tree(self) -> Any:
        return orjson.loads(self.frame)

    def value(self, path: Path) -> Any:
        return self._values[path]

    def with_raw(self, path: Path, raw: bytes) -> bytes:
        """The frame with the value at `path` replaced by raw JSON bytes (valid or not)."""
        return orjson.dumps(_set(self.tree(), path, _SENTINEL)).replace(_SENTINEL_JSON, raw, 1)

    def with_value(self, path: Path, value: Any) -> bytes:
        return orjson.dumps(_set(self.tree(), path, value))


def _same_type(original: Any, text: str) -> Any:
    """`text` as a string when the venue sent a string there, else as a JSON number."""
    return text if isinstance(original, str) else orjson.loads(text)


def _deep(rng: random.Random) -> bytes:
    depth = rng.choice(_DEPTHS)
    if rng.random() < 0.5:
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def _json_mutation(rng: random.Random, kind: str, source: _JsonFrame) -> bytes:
    frame = source.frame
    if kind == "deep_nesting":
        path, _ = rng.choice(source.nodes)
        return source.with_raw(path, _deep(rng))
    if kind == "out_of_range_number" and source.numbers:
        path = rng.choice(source.numbers)
        token = rng.choice(_OUT_OF_RANGE)
        quoted = isinstance(source.value(path), str) and rng.random() < 0.8
        return source.with_raw(path, b'"' + token + b'"' if quoted else token)
    if kind == "invalid_utf8":
        bad = rng.choice(_BAD_UTF8)
        if source.strings and rng.random() < 0.7:
            path = rng.choice(source.strings)
            text = source.value(path).encode()
            cut = rng.randint(0, len(text))
            return source.with_raw(path, b'"' + text[:cut] + bad + text[cut:] + b'"')
        cut = rng.randint(0, len(frame))
        return frame[:cut] + bad + frame[cut:]
    if kind == "non_positive_price" and source.prices:
        path = rng.choice(source.prices)
        return source.with_value(path, _same_type(source.value(path), rng.choice(_NON_POSITIVE)))
    if kind == "negative_size" and source.sizes:
        path = rng.choice(source.sizes)
        return source.with_value(path, _same_type(source.value(path), rng.choice(_NEGATIVE)))
    if kind == "empty_symbol" and source.symbols:
        path = rng.choice(source.symbols)
        text = source.value(path)
        # A channel or topic names its symbol after a separator: keep the prefix.
        for separator in (":", "_"):
            if path[-1] in ("channel", "topic") and separator in text:
                return source.with_value(path, text[: text.rindex(separator) + 1])
        return source.with_value(path, "")
    if kind == "type_swap":
        path, _ = rng.choice(source.nodes)
        return source.with_value(path, rng.choice(_OTHER_TYPES))
    return _byte_mutation(rng, kind, frame)


def _byte_mutation(rng: random.Random, kind: str, frame: bytes) -> bytes:
    """Truncation and byte flips; also the fallback where a frame has no node of a kind."""
    if not frame:
        return bytes([rng.randrange(256)])
    if kind == "truncation":
        return frame[: rng.randrange(len(frame))]
    mutated = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        position = rng.randrange(len(mutated))
        mutated[position] = mutated[position] ^ rng.randint(1, 255)
    return bytes(mutated)


# --- replay (CSV lines) -------------------------------------------------------------------

_CSV_OTHER = (
    b"true",
    b"null",
    b"[]",
    b"{}",
    b"abc",
    b"1.5e3",
    b"",
    b"0x10",
    b"1_000",
    b" 12",
    b"\xd9\xa1\xd9\xa2",
    b"-",
    b".",
)


def _csv_mutation(rng: random.Random, kind: str, frame: bytes) -> bytes:
    columns = frame.split(b",")
    if len(columns) < 4:
        return _byte_mutation(rng, kind, frame)

    def with_column(index: int, value: bytes) -> bytes:
        return b",".join(columns[:index] + [value] + columns[index + 1 :])

    numeric = [index for index in (0, 2, 3, 6) if index < len(columns)]
    if kind == "deep_nesting":
        return with_column(rng.randrange(len(columns)), _deep(rng)) if rng.random() < 0.8 else _deep(rng)
    if kind == "out_of_range_number":
        return with_column(rng.choice(numeric), rng.choice(_OUT_OF_RANGE))
    if kind == "invalid_utf8":
        index = rng.randrange(len(columns))
        cut = rng.randint(0, len(columns[index]))
        return with_column(index, columns[index][:cut] + rng.choice(_BAD_UTF8) + columns[index][cut:])
    if kind == "non_positive_price":
        return with_column(2, rng.choice(_NON_POSITIVE).encode())
    if kind == "negative_size":
        return with_column(3, rng.choice(_NEGATIVE).encode())
    if kind == "empty_symbol":
        return with_column(1, b"")
    if kind == "type_swap":
        return with_column(rng.randrange(len(columns)), rng.choice(_CSV_OTHER))
    return _byte_mutation(rng, kind, frame)


# --- upstox (protobuf) --------------------------------------------------------------------

_PB_OUT_OF_RANGE_INT = (2**62, 2**63 - 1, 92_233_720_368, 10**15, 2**40)
_PB_OUT_OF_RANGE_FLOAT = (1e300, float("inf"), float("-inf"), float("nan"), 1e19, 9.3e10, 5e-324)
_UTF8_PLACEHOLDER = "\x02\x02\x02\x02"  # a 4-byte key, swapped for 4 invalid bytes once serialized


def _ltpcs(response: pb.FeedResponse) -> list[Any]:
    """Every LTPC message of a response (the trades), however the feed carries it."""
    found = []
    for feed in response.feeds.values():
        union = feed.WhichOneof("FeedUnion")
        if union == "ltpc":
            found.append(feed.ltpc)
        elif union == "fullFeed":
            full = feed.fullFeed
            found.append(full.marketFF.ltpc if full.WhichOneof("FullFeedUnion") == "marketFF" else full.indexFF.ltpc)
        elif union == "firstLevelWithGreeks":
            found.append(feed.firstLevelWithGreeks.ltpc)
    return found


def _quotes(response: pb.FeedResponse) -> list[Any]:
    found = []
    for feed in response.feeds.values():
        union = feed.WhichOneof("FeedUnion")
        if union == "fullFeed" and feed.fullFeed.WhichOneof("FullFeedUnion") == "marketFF":
            found.extend(feed.fullFeed.marketFF.marketLevel.bidAskQuote)
        elif union == "firstLevelWithGreeks" and feed.firstLevelWithGreeks.HasField("firstDepth"):
            found.append(feed.firstLevelWithGreeks.firstDepth)
    return found


def _with_vtt(response: pb.FeedResponse) -> list[Any]:
    found = []
    for feed in response.feeds.values():
        union = feed.WhichOneof("FeedUnion")
        if union == "fullFeed" and feed.fullFeed.WhichOneof("FullFeedUnion") == "marketFF":
            found.append(feed.fullFeed.marketFF)
        elif union == "firstLevelWithGreeks":
            found.append(feed.firstLevelWithGreeks)
    return found


def _protobuf_mutation(rng: random.Random, kind: str, frame: bytes) -> bytes:
    response = pb.FeedResponse()
    try:
        response.ParseFromString(frame)
    except Exception:  # a golden frame that is malformed on purpose: bytes only
        return _byte_mutation(rng, kind, frame)
    ltpcs, quotes, vtts = _ltpcs(response), _quotes(response), _with_vtt(response)
    if kind == "deep_nesting":
        # Unknown groups nested deeper than the decoder's recursion limit.
        depth = rng.choice(_DEPTHS)
        field = rng.choice((15, 99, 1000))
        start, end = _varint((field << 3) | 3), _varint((field << 3) | 4)
        nested = start * depth + end * depth
        return frame + nested if rng.random() < 0.5 else nested + frame
    if kind == "out_of_range_number" and (ltpcs or quotes):
        choice = rng.randrange(4)
        if choice == 0 and ltpcs:
            rng.choice(ltpcs).ltq = rng.choice(_PB_OUT_OF_RANGE_INT)
        elif choice == 1 and vtts:
            rng.choice(vtts).vtt = rng.choice(_PB_OUT_OF_RANGE_INT)
        elif choice == 2 and ltpcs:
            target = rng.choice(ltpcs)
            if rng.random() < 0.5:
                target.ltp = rng.choice(_PB_OUT_OF_RANGE_FLOAT)
            else:
                target.ltt = rng.choice(_PB_OUT_OF_RANGE_INT)
        elif quotes:
            quote = rng.choice(quotes)
            quote.bidQ, quote.askP = rng.choice(_PB_OUT_OF_RANGE_INT), rng.choice(_PB_OUT_OF_RANGE_FLOAT)
        else:
            response.currentTs = rng.choice(_PB_OUT_OF_RANGE_INT)
        return response.SerializeToString()
    if kind == "invalid_utf8" and response.feeds:
        key = rng.choice(sorted(response.feeds))
        response.feeds[_UTF8_PLACEHOLDER].CopyFrom(response.feeds[key])
        del response.feeds[key]
        bad = (rng.choice(_BAD_UTF8) + b"\xff\xff\xff\xff")[:4]
        return response.SerializeToString().replace(_UTF8_PLACEHOLDER.encode(), bad, 1)
    if kind == "non_positive_price" and (ltpcs or quotes):
        price = -rng.choice((0.05, 1.0, 82.35, 1e-9, 0.0))
        if ltpcs and (not quotes or rng.random() < 0.6):
            rng.choice(ltpcs).ltp = price
        else:
            quote = rng.choice(quotes)
            if rng.random() < 0.5:
                quote.bidP = price
            else:
                quote.askP = price
        return response.SerializeToString()
    if kind == "negative_size" and (ltpcs or quotes):
        size = -rng.choice((1, 10, 1000, 2**40))
        choice = rng.randrange(3)
        if choice == 0 and ltpcs:
            rng.choice(ltpcs).ltq = size
        elif choice == 1 and vtts:
            rng.choice(vtts).vtt = size
        elif quotes:
            quote = rng.choice(quotes)
            quote.bidQ, quote.askQ = (size, quote.askQ) if rng.random() < 0.5 else (quote.bidQ, size)
        elif ltpcs:
            rng.choice(ltpcs).ltq = size
        return response.SerializeToString()
    if kind == "empty_symbol" and response.feeds:
        key = rng.choice(sorted(response.feeds))
        response.feeds[""].CopyFrom(response.feeds[key])
        del response.feeds[key]
        return response.SerializeToString()
    if kind == "type_swap":
        # The wire type of a field changed (a varint where a message was, a length-
        # delimited field where a double was): the protobuf form of a value of another type.
        data = bytearray(frame)
        for _ in range(rng.randint(1, 3)):
            position = rng.randrange(len(data))
            data[position] = (data[position] & 0xF8) | rng.choice((0, 1, 2, 5))
        return bytes(data)
    return _byte_mutation(rng, kind, frame)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


# --- the generator --------------------------------------------------------------------------


def _mutator(venue: str, frames: list[bytes]) -> Callable[[random.Random, str, int], bytes]:
    if venue == "upstox":
        return lambda rng, kind, index: _protobuf_mutation(rng, kind, frames[index])
    if venue == "replay":
        return lambda rng, kind, index: _csv_mutation(rng, kind, frames[index])
    parsed: list[_JsonFrame | None] = []
    for frame in frames:
        try:
            parsed.append(_JsonFrame(frame))
        except orjson.JSONDecodeError:
            parsed.append(None)  # a golden frame that is malformed on purpose

    def mutate(rng: random.Random, kind: str, index: int) -> bytes:
        source = parsed[index]
        return _byte_mutation(rng, kind, frames[index]) if source is None else _json_mutation(rng, kind, source)

    return mutate


def mutated_frames(venue: str, count: int, seed: int) -> Iterator[tuple[str, bytes]]:
    """Yield `count` (mutation class, frame) pairs made from the venue's golden frames."""
    frames = [frame for frame in golden.read_frames(venue) if frame]
    rng = random.Random(f"{venue}:{seed}")
    mutate = _mutator(venue, frames)
    for number in range(count):
        kind = MUTATIONS[number % len(MUTATIONS)]
        yield kind, mutate(rng, kind, rng.randrange(len(frames)))
