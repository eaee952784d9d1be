"""manage.py parseframes: stdin frames to JSON events, per-stream state across lines."""

from __future__ import annotations

import io
import json
import sys
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from feeds.venues import VENUES
from tests.feeds.venues import golden

REQUIRED = {"venue", "symbol", "kind", "price", "quantity", "side", "trade_id", "exchange_time_ms"}


def run(venue: str, text: str) -> tuple[list[dict[str, object]], list[str]]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdin", io.StringIO(text))
        call_command("parseframes", venue=venue, stdout=out, stderr=err)
    return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue().splitlines()


@pytest.mark.parametrize("venue", sorted(VENUES))
def test_every_recorded_event_comes_out_with_the_required_fields(venue: str) -> None:
    text = golden.frames_path(venue).read_text()
    records, errors = run(venue, text)
    expected_rows = golden.read_expected(venue)
    assert len(errors) == sum("error" in row for row in expected_rows)
    assert records
    for record in records:
        assert set(record) >= REQUIRED
        assert record["venue"] == venue
        assert record["kind"] in {"trade", "mark_price", "funding_rate", "ticker", "book_ticker", "order_book"}
        assert record["side"] in {"buy", "sell", None}
        assert isinstance(record["exchange_time_ms"], int)
        for key in ("price", "quantity"):
            assert record[key] is None or isinstance(record[key], str)


def test_prices_and_quantities_equal_the_venue_strings_in_value() -> None:
    frame = golden.read_frames("binance-usdm")[1].decode()
    (record,), _ = run("binance-usdm", frame + "\n")
    sent = json.loads(frame)["data"]
    assert Decimal(record["price"]) == Decimal(sent["p"]) and Decimal(record["quantity"]) == Decimal(sent["q"])  # type: ignore[arg-type]
    assert (record["side"], record["trade_id"], record["exchange_time_ms"]) == ("sell", str(sent["a"]), sent["T"])


def test_kucoin_quantity_is_contracts_as_sent() -> None:
    frame = golden.read_frames("kucoin-futures")[3].decode()
    (record,), _ = run("kucoin-futures", frame + "\n")
    assert record["quantity"] == "135"


def test_upstox_lines_are_one_stream_so_vtt_deltas_carry_across_lines() -> None:
    lines = golden.frames_path("upstox").read_text().splitlines()
    records, errors = run("upstox", "\n".join(lines[:4]) + "\n")
    trades = [(record["symbol"], record["quantity"]) for record in records if record["kind"] == "trade"]
    # snapshot (cold start), live tick (+50), then the depth-only repeat gives no trade
    assert trades == [("NSE_EQ|INE848E01016", "0"), ("NSE_EQ|INE848E01016", "50")]
    assert errors == []


def test_malformed_lines_go_to_stderr_one_each_and_the_rest_still_parse() -> None:
    good = golden.read_frames("bitflyer")[2].decode()
    records, errors = run("bitflyer", "{oops\n" + good + "\nnot json\n")
    assert len(records) == 1 and len(errors) == 2
    assert "line 1" in errors[0] and "line 3" in errors[1]


def test_bad_base64_is_a_malformed_line() -> None:
    records, errors = run("upstox", "***\n")
    assert records == [] and len(errors) == 1


def test_unknown_venue_is_a_command_error() -> None:
    with pytest.raises(CommandError):
        call_command("parseframes", venue="nope", stdout=io.StringIO())
