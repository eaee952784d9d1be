"""manage.py parseframes reports a hostile line with its reason and goes on with the next."""

from __future__ import annotations

import io
import json
import sys

import pytest
from django.core.management import call_command

from tests.feeds.venues import golden


def run(venue: str, data: bytes) -> tuple[list[dict[str, object]], list[str]]:
    """Run the command with `data` as its standard input, bytes as a pipe would deliver them."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        call_command("parseframes", venue=venue, stdout=out, stderr=err)
    return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue().splitlines()


TRADE = (
    b'{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1732924800125,"s":"BTCUSDT","a":%d,'
    b'"p":"96712.40","q":"0.015","T":1732924800123,"m":true}}'
)


def test_invalid_utf8_deep_json_and_huge_integers_are_reported_and_the_next_lines_parsed() -> None:
    lines = [
        TRADE % 1,
        b'{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1,"s":"BTC\xff\xfe","a":2,"p":"1","q":"1","T":1732924800123,"m":true}}',
        b'{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","x":' + b"[" * 1000 + b"]" * 1000 + b"}}",
        b'{"stream":"btcusdt@bookTicker","data":{"e":"bookTicker","u":'
        + b"9" * 30
        + b',"T":1732924800123,"s":"BTCUSDT","b":"1","B":"1","a":"2","A":"1"}}',
        b'{"stream":"btcusdt@aggTrade","data":{"e":"aggTrade","E":1,"s":"BTCUSDT","a":3,"p":"'
        + b"9" * 30
        + b'","q":"1","T":1732924800123,"m":true}}',
        b"\xff" * 40,
        TRADE % 4,
    ]
    records, errors = run("binance-usdm", b"\n".join(lines) + b"\n")

    assert [record["trade_id"] for record in records] == ["1", "4"]
    assert len(errors) == 5
    for line_number, reason in zip((2, 3, 4, 5, 6), ("utf8", "depth", "number", "number", "json")):
        assert f"line {line_number}: skipped ({reason}" in " ".join(errors), errors


def test_a_binary_venue_reports_bad_base64_and_bad_protobuf_and_goes_on() -> None:
    good = golden.frames_path("upstox").read_text().splitlines()[:3]
    data = "\n".join([good[0], "not base64 at all!", good[1], "/////////////w==", good[2]]).encode() + b"\n\xff\xfe\n"
    records, errors = run("upstox", data)

    assert records and all(record["venue"] == "upstox" for record in records)
    assert [error.split(": skipped (")[1].split(":")[0] for error in errors] == ["base64", "protobuf", "base64"]


def test_a_text_venue_line_that_is_not_utf8_is_refused_by_its_parser() -> None:
    good = b"1732924800123,BTC-USDT,96712.4,0.015,1,sell"
    records, errors = run("replay", good + b"\n1732924800124,BTC\xff,1,1\n" + good.replace(b",1,", b",2,") + b"\n")

    assert [record["trade_id"] for record in records] == ["1", "2"]
    assert len(errors) == 1 and "line 2: skipped (utf8" in errors[0]
