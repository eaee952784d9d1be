"""Venue parse throughput: frames/s per venue against a naive json.loads + Decimal parser.

The frames are the recorded golden frames that carry data (tests/fixtures/<venue>/),
repeated to FRAMES per venue, so the mix is the venue's real message shapes. The
baseline decodes the same frames with `json.loads(..., parse_float=Decimal)` and
builds the same fields with Decimal: the obvious exact parser one would write first.
Both run in the same process, taking turns every round (so a busy machine slows both
alike), best of ROUNDS each.

Two mixes per text venue: "recorded" repeats the recorded frames, so prices and sizes
repeat as they do on a live book (the parsers' number cache is warm); "unique" gives
every decimal in every frame fresh digits, the worst case where no number repeats.

Run: .venv/bin/python bench/bench_parse.py   (prints figures; asserts nothing about time)
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FRAMES = int(os.environ.get("BENCH_PARSE_FRAMES", "300000"))
ROUNDS = 5
RECEIVED_NS = 1_732_924_800_500_000_000
_NS_PER_MS = 1_000_000


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    import django

    django.setup()


# --- naive parsers: json.loads + Decimal, producing the same fields ------------------------


def naive_binance(frame: bytes) -> list[dict[str, Any]]:
    message = json.loads(frame)
    payload = message.get("data", message) if isinstance(message, dict) else message
    updates = payload if isinstance(payload, list) else [payload]
    events = []
    for data in updates:
        kind = data["e"]
        if kind == "aggTrade":
            events.append(
                {
                    "symbol": data["s"],
                    "price": Decimal(data["p"]),
                    "quantity": Decimal(data["q"]),
                    "ts": data["T"] * _NS_PER_MS,
                    "id": str(data["a"]),
                    "side": "sell" if data["m"] else "buy",
                }
            )
        elif kind == "markPriceUpdate":
            events.append(
                {
                    "symbol": data["s"],
                    "mark": Decimal(data["p"]),
                    "index": Decimal(data["i"]),
                    "funding": Decimal(data["r"]) if data["r"] else None,
                    "ts": data["E"] * _NS_PER_MS,
                }
            )
        elif kind == "bookTicker":
            events.append(
                {
                    "symbol": data["s"],
                    "bid": Decimal(data["b"]),
                    "bid_size": Decimal(data["B"]),
                    "ask": Decimal(data["a"]),
                    "ask_size": Decimal(data["A"]),
                    "ts": data["T"] * _NS_PER_MS,
                }
            )
    return events


def _iso_ns(text: str) -> int:
    from datetime import datetime

    whole, _, fraction = text.rstrip("Z").partition(".")
    seconds = datetime.fromisoformat(whole + "+00:00").timestamp()
    return int(seconds) * 1_000_000_000 + int(fraction.ljust(9, "0")[:9] or 0)


def naive_bitflyer(frame: bytes) -> list[dict[str, Any]]:
    message = json.loads(frame, parse_float=Decimal, parse_int=Decimal)
    params = message.get("params")
    if not params:
        return []
    body = params["message"]
    if isinstance(body, list):
        return [
            {
                "symbol": params["channel"][21:],
                "price": item["price"],
                "quantity": item["size"],
                "ts": _iso_ns(item["exec_date"]),
                "id": str(item["id"]),
                "side": item["side"].lower() or None,
            }
            for item in body
        ]
    return [
        {
            "symbol": body["product_code"],
            "last": body["ltp"],
            "bid": body["best_bid"],
            "ask": body["best_ask"],
            "ts": _iso_ns(body["timestamp"]),
        }
    ]


def naive_kucoin(frame: bytes) -> list[dict[str, Any]]:
    message = json.loads(frame, parse_float=Decimal, parse_int=Decimal)
    if message.get("type") != "message":
        return []
    data, subject = message["data"], message["subject"]
    if subject == "match":
        return [
            {
                "symbol": data["symbol"],
                "price": Decimal(data["price"]),
                "quantity": Decimal(data["size"]),
                "ts": int(data["ts"]),
                "id": data["tradeId"],
                "side": data["side"],
            }
        ]
    if subject == "mark.index.price":
        return [
            {
                "symbol": message["topic"].partition(":")[2],
                "mark": data["markPrice"],
                "index": data["indexPrice"],
                "ts": int(data["timestamp"]) * _NS_PER_MS,
            }
        ]
    if subject == "funding.rate":
        return [
            {
                "symbol": message["topic"].partition(":")[2],
                "funding": data["fundingRate"],
                "ts": int(data["timestamp"]) * _NS_PER_MS,
            }
        ]
    if subject == "tickerV2":
        return [
            {
                "symbol": data["symbol"],
                "bid": Decimal(data["bestBidPrice"]),
                "ask": Decimal(data["bestAskPrice"]),
                "bid_size": data["bestBidSize"],
                "ask_size": data["bestAskSize"],
                "ts": int(data["ts"]),
            }
        ]
    return []


def naive_upstox(frame: bytes) -> list[dict[str, Any]]:
    from google.protobuf.json_format import MessageToDict
    from upstox_client.feeder.proto import MarketDataFeedV3_pb2 as pb

    response = pb.FeedResponse()
    response.ParseFromString(frame)
    message = MessageToDict(response)
    events = []
    for key, feed in message.get("feeds", {}).items():
        ltpc = feed.get("ltpc") or feed.get("fullFeed", {}).get("marketFF", {}).get("ltpc")
        if ltpc:
            events.append(
                {
                    "symbol": key,
                    "price": Decimal(repr(ltpc.get("ltp", 0.0))),
                    "quantity": Decimal(ltpc.get("ltq", "0")),
                    "ts": int(ltpc.get("ltt", "0")) * _NS_PER_MS,
                }
            )
    return events


def naive_dzengi(frame: bytes) -> list[dict[str, Any]]:
    message = json.loads(frame, parse_float=Decimal, parse_int=Decimal)
    if message.get("status") != "OK" or message.get("destination") != "internal.trade":
        return []
    data = message["payload"]
    return [
        {
            "symbol": data["symbol"],
            "price": data["price"],
            "quantity": data["size"],
            "ts": int(data["ts"]) * _NS_PER_MS,
            "id": str(data["id"]),
            "side": "buy" if data["buyer"] else "sell",
        }
    ]


def naive_tabdeal(frame: bytes) -> list[dict[str, Any]]:
    message = json.loads(frame, parse_float=Decimal, parse_int=Decimal)
    if "stream" not in message:
        return []
    data = message["data"]
    if isinstance(data, str):  # the venue may send the payload as JSON text
        data = json.loads(data, parse_float=Decimal, parse_int=Decimal)
    return [
        {
            "symbol": message["stream"].split("-")[1],
            "bids": [(Decimal(price), Decimal(size)) for price, size in data["b"]],
            "asks": [(Decimal(price), Decimal(size)) for price, size in data["a"]],
            "ts": int(data["E"]) * _NS_PER_MS,
        }
    ]


NAIVE: dict[str, Callable[[bytes], list[dict[str, Any]]]] = {
    "binance-usdm": naive_binance,
    "bitflyer": naive_bitflyer,
    "kucoin-futures": naive_kucoin,
    "upstox": naive_upstox,
    "dzengi": naive_dzengi,
    "tabdeal": naive_tabdeal,
}
JSON_VENUES = ("binance-usdm", "bitflyer", "kucoin-futures", "dzengi", "tabdeal")


def data_frames(venue: str) -> list[bytes]:
    """Return the recorded frames that carry events, repeated to FRAMES frames."""
    from feeds.venues import get_venue
    from feeds.venues.base import ParseError
    from feeds.venues.frames import frame_from_line

    adapter = get_venue(venue)
    lines = (ROOT / "tests" / "fixtures" / venue / "frames.txt").read_text().splitlines()
    frames = []
    for line in lines:
        frame = frame_from_line(adapter, line)
        try:
            if adapter.parse(frame, RECEIVED_NS):
                frames.append(frame)
        except ParseError:
            continue
    return (frames * (FRAMES // len(frames) + 1))[:FRAMES]


_DECIMAL = re.compile(rb"(\d+\.)(\d+)")


def unique_numbers(frames: list[bytes]) -> list[bytes]:
    """Return the frames with every decimal's fraction replaced by fresh, non-zero-ending digits."""

    def vary(frame: bytes, rng: random.Random) -> bytes:
        def digits(match: re.Match[bytes]) -> bytes:
            width = len(match.group(2))
            fresh = "".join(rng.choice("0123456789") for _ in range(width - 1)) + rng.choice("123456789")
            return match.group(1) + fresh.encode()

        return _DECIMAL.sub(digits, frame)

    return [vary(frame, random.Random(number)) for number, frame in enumerate(frames)]


def frames_per_second(parsers: list[Callable[[bytes], object]], frames: list[bytes]) -> list[float]:
    """Return each parser's best rate over ROUNDS, the parsers taking turns every round.

    Alternating keeps both under the same machine conditions when other work shares the CPU.
    """
    best = [float("inf")] * len(parsers)
    for _ in range(ROUNDS):
        for number, parse in enumerate(parsers):
            started = time.perf_counter()
            for frame in frames:
                parse(frame)
            best[number] = min(best[number], time.perf_counter() - started)
    return [len(frames) / elapsed for elapsed in best]


def main() -> None:
    _setup_django()
    from feeds.venues import VENUES

    print(f"bench_parse: {FRAMES:,} recorded data frames per venue, best of {ROUNDS} alternating rounds")
    for name in sorted(VENUES):
        adapter = VENUES[name]
        recorded = data_frames(name)
        mixes = [("recorded", recorded)]
        if not getattr(adapter, "binary_frames", False):
            mixes.append(("unique", unique_numbers(recorded)))
        for mix, frames in mixes:
            _report(name, mix, adapter, frames)


def _report(name: str, mix: str, adapter: Any, frames: list[bytes]) -> None:
    from feeds.venues.numbers import clear_number_cache

    # Each mix starts cold: the number caches keep nothing from the previous one.
    clear_number_cache()

    def ours(frame: bytes) -> object:
        return adapter.parse(frame, RECEIVED_NS)

    naive = NAIVE.get(name)
    if naive is None:
        (rate,) = frames_per_second([ours], frames)
        print(f"  {name:15s} {mix:9s} parse {rate:>11,.0f} frames/s")
        return
    rate, baseline = frames_per_second([ours, naive], frames)
    # The target is on recorded frames; "unique" is the worst case shown beside it.
    if name not in JSON_VENUES:
        target = ""
    elif mix == "recorded":
        target = "  (target >= 2x)"
    else:
        target = "  (worst case, no target)"
    print(
        f"  {name:15s} {mix:9s} parse {rate:>11,.0f} frames/s   naive {baseline:>11,.0f} frames/s   "
        f"ratio {rate / baseline:4.2f}x{target}"
    )


if __name__ == "__main__":
    main()
