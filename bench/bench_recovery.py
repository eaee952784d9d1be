"""Recovery figures: the costs on the hot path and the login-to-resume latency.

Run: .venv/bin/python bench/bench_recovery.py   (a throwaway SQLite database under a temp dir)
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["VAR_DIR"] = tempfile.mkdtemp(prefix="bench-recovery-")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    logging.disable(logging.INFO)


def rate(label: str, count: int, fn: Callable[[], object]) -> None:
    started = time.perf_counter()
    for _ in range(count):
        fn()
    elapsed = time.perf_counter() - started
    print(f"{label}: {count / elapsed:,.0f}/s ({elapsed / count * 1e6:,.1f} us each)")


def bench_pure() -> None:
    from recovery.encryption import decrypt_token, encrypt_token
    from recovery.redaction import RedactTokensFilter, register_secret
    from recovery.upstox import classify_upstox_error, upstox_token_expiry

    secret = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJBQjEyMzQifQ.c2lnbmF0dXJlLXZhbHVlLXZhbHVl"
    register_secret(secret)
    ciphertext = encrypt_token(secret)
    rate("encrypt token (MultiFernet)", 5000, lambda: encrypt_token(secret))
    rate("decrypt token (MultiFernet)", 5000, lambda: decrypt_token(ciphertext))
    from datetime import datetime

    now = datetime.now(UTC)
    rate("upstox_token_expiry", 100_000, lambda: upstox_token_expiry(now))
    body = b'{"status":"error","errors":[{"errorCode":"UDAPI100050","message":"Invalid token"}]}'
    rate("classify_upstox_error", 100_000, lambda: classify_upstox_error(401, body))
    log_filter = RedactTokensFilter()
    clean = logging.LogRecord("feed", logging.INFO, __file__, 1, "feed upstox: redial after %ss", (2.5,), None)
    rate("redaction filter, clean log line", 50_000, lambda: log_filter.filter(clean))


async def bench_runtime() -> None:
    from datetime import datetime

    from channels.db import database_sync_to_async

    from core.health import HealthBoard
    from recovery.brokers import use_exchanges
    from recovery.clock import SystemClock
    from recovery.coordinator import AuthState, AuthStateCoordinator
    from recovery.oauth_manager import OAuthTokenManager
    from recovery.recover import oauth_submit_code
    from recovery.services import token_await_auth, token_store_valid
    from recovery.tokens import TokenKey, TokenKind, TokenState
    from recovery.upstox import IST, UpstoxApp, UpstoxTokenExchange
    from tests.recovery.fake_upstox_auth import DIALOG_PATH, TOKEN_PATH, FakeUpstoxAuth

    fake = FakeUpstoxAuth(client_id="bench", client_secret="bench-secret", redirect_uri="http://127.0.0.1/cb").start()
    exchange = UpstoxTokenExchange(
        UpstoxApp(
            "upstox", "bench", "bench-secret", "http://127.0.0.1/cb", fake.url + DIALOG_PATH, fake.url + TOKEN_PATH
        )
    )
    key = TokenKey("upstox", TokenKind.OAUTH)
    # Evening IST: outside the blackout whatever time the bench runs.
    evening = datetime.now(IST).replace(hour=20, minute=0).astimezone(UTC)
    try:
        with use_exchanges([exchange]):
            grant = await exchange.exchange(fake.log_in(), now=evening)
            await database_sync_to_async(token_store_valid)(key=key, grant=grant)
            poll_s = 0.05
            manager = OAuthTokenManager(key, clock=SystemClock(), poll_interval_s=poll_s)
            await manager.refresh()
            await manager.await_valid_token()
            n = 100_000
            started = time.perf_counter()
            for _ in range(n):
                await manager.await_valid_token()
            elapsed = time.perf_counter() - started
            print(f"await_valid_token while VALID: {n / elapsed:,.0f}/s ({elapsed / n * 1e6:,.2f} us each)")

            n = 200
            started = time.perf_counter()
            for i in range(n):
                await database_sync_to_async(token_await_auth)(key=key, reason=f"report {i}")
            elapsed = time.perf_counter() - started
            print(f"coalesced AWAITING_AUTH reports (one prompt): {n / elapsed:,.0f}/s on SQLite")

            class Resumable:
                name = "bench-feed"
                resumed_at = 0.0

                async def resume_if_stopped(self) -> None:
                    Resumable.resumed_at = time.perf_counter()

            auth_state = AuthState(oauth={key: manager})
            auth_state.register_datasource(key, Resumable())
            tasks = [
                asyncio.create_task(manager.run()),
                asyncio.create_task(AuthStateCoordinator(auth_state, HealthBoard()).run()),
            ]
            latencies = []
            for _ in range(10):
                await database_sync_to_async(token_await_auth)(key=key, reason="expired", expected_fingerprint=None)
                while manager.status.state is not TokenState.AWAITING_AUTH:
                    await asyncio.sleep(0.005)
                Resumable.resumed_at = 0.0
                started = time.perf_counter()
                await oauth_submit_code(key=key, code=fake.log_in(), now=evening)
                exchanged = time.perf_counter()
                while not Resumable.resumed_at:
                    await asyncio.sleep(0.002)
                latencies.append((exchanged - started, Resumable.resumed_at - started))
            for task in tasks:
                task.cancel()
            exchange_ms = sorted(exchanged_s * 1000 for exchanged_s, _ in latencies)
            resume_ms = sorted(resumed_s * 1000 for _, resumed_s in latencies)
            print(
                f"code submitted -> token VALID in DB (local fake broker): median {exchange_ms[5]:.1f} ms, max {exchange_ms[-1]:.1f} ms"
            )
            print(
                f"code submitted -> datasource resumed (state poll {poll_s * 1000:.0f} ms): "
                f"median {resume_ms[5]:.1f} ms, max {resume_ms[-1]:.1f} ms"
            )
    finally:
        fake.stop()


def main() -> None:
    _setup_django()
    print("== recovery ==")
    bench_pure()
    asyncio.run(bench_runtime())


if __name__ == "__main__":
    main()
