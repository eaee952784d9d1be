"""Upstox's daily token rules and error classification: pure functions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from recovery.upstox import (
    IST,
    BrokerErrorKind,
    classify_upstox_error,
    is_token_request_allowed,
    parse_upstox_token_response,
    upstox_authorization_url,
    upstox_blackout_end,
    upstox_token_expiry,
)


def ist(*args: int) -> datetime:
    return datetime(*args, tzinfo=IST)


@pytest.mark.parametrize(
    ("issued", "expires"),
    [
        (ist(2026, 3, 10, 20, 0), ist(2026, 3, 11, 3, 30)),  # 8 PM Tue -> 03:30 Wed (Upstox's example)
        (ist(2026, 3, 11, 2, 30), ist(2026, 3, 11, 3, 30)),  # 02:30 Wed -> 03:30 the same Wed
        (ist(2026, 3, 11, 3, 30), ist(2026, 3, 12, 3, 30)),  # at the expiry instant: the next day's
        (ist(2026, 3, 11, 8, 0), ist(2026, 3, 12, 3, 30)),
        (ist(2026, 12, 31, 23, 59), ist(2027, 1, 1, 3, 30)),
    ],
)
def test_token_expires_at_the_next_0330_ist_whatever_its_issue_time(issued: datetime, expires: datetime) -> None:
    result = upstox_token_expiry(issued.astimezone(UTC))
    assert result == expires
    assert result.tzinfo is UTC


@hsettings(deadline=None)
@given(st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)))
def test_expiry_is_always_a_0330_ist_within_a_day_after_issue(issued: datetime) -> None:
    expiry = upstox_token_expiry(issued)
    assert timedelta(0) < expiry - issued <= timedelta(days=1)
    local = expiry.astimezone(IST)
    assert (local.hour, local.minute, local.second, local.microsecond) == (3, 30, 0, 0)


@pytest.mark.parametrize(
    ("moment", "in_blackout"),
    [
        (ist(2026, 3, 11, 3, 29, 59), False),
        (ist(2026, 3, 11, 3, 30), True),
        (ist(2026, 3, 11, 7, 59, 59), True),
        (ist(2026, 3, 11, 8, 0), False),
        (ist(2026, 3, 11, 20, 0), False),
    ],
)
def test_blackout_is_0330_to_0800_ist(moment: datetime, in_blackout: bool) -> None:
    assert is_token_request_allowed(moment.astimezone(UTC)) is not in_blackout
    end = upstox_blackout_end(moment)
    assert (end == ist(2026, 3, 11, 8, 0)) if in_blackout else end is None


def envelope(code: str) -> bytes:
    return json.dumps(
        {"status": "error", "errors": [{"errorCode": code, "message": "m", "propertyPath": None, "invalidValue": None}]}
    ).encode()


@pytest.mark.parametrize(
    ("status", "body", "during_exchange", "kind"),
    [
        (401, envelope("UDAPI100050"), False, BrokerErrorKind.INVALID_TOKEN),
        (401, envelope("UDAPI100016"), True, BrokerErrorKind.NON_RECOVERABLE),
        (400, envelope("UDAPI100068"), True, BrokerErrorKind.NON_RECOVERABLE),
        (401, envelope("UDAPI100069"), True, BrokerErrorKind.NON_RECOVERABLE),
        (403, envelope("UDAPI100073"), False, BrokerErrorKind.NON_RECOVERABLE),
        (429, envelope("UDAPI10005"), True, BrokerErrorKind.RATE_LIMITED),
        (500, envelope("UDAPI100500"), True, BrokerErrorKind.TRANSIENT),
        (503, b"<html>maintenance</html>", True, BrokerErrorKind.TRANSIENT),
        (400, envelope("UDAPI100036"), True, BrokerErrorKind.CODE_REJECTED),
        (400, b"not json", True, BrokerErrorKind.CODE_REJECTED),
        (401, b"", False, BrokerErrorKind.INVALID_TOKEN),
        (400, envelope("UDAPI100036"), False, BrokerErrorKind.TRANSIENT),
    ],
)
def test_error_bodies_are_classified_by_error_code_then_status(
    status: int, body: bytes, during_exchange: bool, kind: BrokerErrorKind
) -> None:
    assert classify_upstox_error(status, body, during_code_exchange=during_exchange).kind is kind


def test_classified_error_keeps_the_brokers_code_and_message() -> None:
    error = classify_upstox_error(401, envelope("UDAPI100050"))
    assert (error.error_code, error.message, error.status) == ("UDAPI100050", "m", 401)
    assert "UDAPI100050" in error.describe()


def test_authorization_url_carries_the_documented_parameters() -> None:
    url = upstox_authorization_url("https://a.example/dialog", client_id="cid", redirect_uri="https://s/cb", state="st")
    assert url == "https://a.example/dialog?response_type=code&client_id=cid&redirect_uri=https%3A%2F%2Fs%2Fcb&state=st"
    assert "state" not in upstox_authorization_url(
        "https://a.example/dialog", client_id="c", redirect_uri="r", state=None
    )


def test_token_response_parse_takes_access_token_and_user_id() -> None:
    body = json.dumps({"user_id": "AB1", "access_token": "tok-123", "extended_token": "ext"}).encode()
    assert parse_upstox_token_response(body) == ("tok-123", "AB1")
    with pytest.raises(ValueError):
        parse_upstox_token_response(b'{"user_id": "AB1"}')
