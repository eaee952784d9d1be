"""A runtime process for the cross-process tests: run the trade executor on one signal.

    python -m tests.orders.executor_child '<json>'

JSON keys: signals (a list of Signal fields), broker ("paper" or "binance"), fapi_url,
kill_at (an entry step at which the process SIGKILLs itself), lock_ttl_s, gated (wait
for a "go" line on stdin before each signal, so that two children race on it). Prints
"ready" once set up, then one JSON line of outcomes per signal. DATABASE_URL in the
environment names the test database.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal as signals
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tradingsite.settings")
    import django

    django.setup()
    from orders.brokers.binance_usdm import BinanceUsdmBroker
    from orders.brokers.registry import BrokerRegistry
    from orders.executor import ExecutorConfig, TradeExecutor
    from processor.signals import Signal, SignalKind

    args = json.loads(sys.argv[1])
    signals_in = [Signal(**{**raw, "kind": SignalKind(raw["kind"])}) for raw in args["signals"]]

    def hook(step: str) -> None:
        if step == args.get("kill_at"):
            os.kill(os.getpid(), signals.SIGKILL)

    async def run() -> None:
        if args["broker"] == "binance":
            from tests.fakes.brokers.binance_usdm_orders import API_KEY, API_SECRET

            broker = BinanceUsdmBroker(api_key=API_KEY, secret=API_SECRET, demo=True, fapi_url=args["fapi_url"])
            broker_for = lambda plan: broker  # noqa: E731
        else:
            registry = BrokerRegistry()
            broker_for = lambda plan: registry.broker_for(account_id=plan.account_id, venue="paper", mode="paper")  # noqa: E731
        executor = TradeExecutor(
            broker_for=broker_for,
            config=ExecutorConfig(lock_ttl_s=args.get("lock_ttl_s", 30.0), broker_timeout_s=5.0),
            step_hook=hook,
        )
        print("ready", flush=True)
        try:
            for signal in signals_in:
                if args.get("gated"):
                    await asyncio.to_thread(sys.stdin.readline)
                print(json.dumps(await executor.handle(signal)), flush=True)
        finally:
            if args["broker"] == "binance":
                await broker.close()

    asyncio.run(run())


if __name__ == "__main__":
    main()
