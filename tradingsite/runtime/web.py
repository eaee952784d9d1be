"""The embedded site: daphne and the runtime on one event loop, in one process.

Daphne runs Twisted's asyncio reactor (on uvloop where it is installed); the runtime
starts on that same loop from daphne's ready callback, so the in-memory channel layer
reaches the websockets.
The runtime owns the lifetime: when it stops (signal or fatal error) the reactor
stops; when the reactor stops first (it could not listen) the runtime is stopped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from core.runtime.core import Runtime
from core.runtime.signals import new_fast_loop, stop_on_signals

log = logging.getLogger(__name__)


def daphne_endpoint(host: str, port: int) -> str:
    """Return a Twisted endpoint string; IPv6 colons must be escaped."""
    return f"tcp:port={port}:interface={host.strip('[]').replace(':', chr(92) + ':')}"


def install_reactor() -> None:
    """Install Twisted's asyncio reactor on a fast loop (uvloop) before daphne does.

    Daphne installs the reactor on a default asyncio loop at import unless an asyncio
    reactor is already there; the reactor only needs the loop's add_reader/add_writer.
    """
    import sys

    if "twisted.internet.reactor" in sys.modules:
        return
    from twisted.internet import asyncioreactor

    asyncioreactor.install(new_fast_loop())


def serve_with_runtime(application: Any, runtime: Runtime, *, host: str, port: int) -> int:
    """Serve `application` on host:port while `runtime` runs; return the exit code."""
    install_reactor()
    from daphne.server import Server  # keeps the reactor installed above
    from twisted.internet import reactor

    outcome: dict[str, Any] = {}

    async def run_runtime() -> None:
        outcome["code"] = await runtime.run()
        if reactor.running:
            reactor.stop()  # type: ignore[misc]  # twisted's reactor is a module typed as a class

    def on_ready() -> None:
        loop = asyncio.get_event_loop()
        log.info("site: web and runtime on %s", type(loop).__module__.split(".")[0])
        stop_on_signals(loop, runtime.request_stop)
        outcome["task"] = loop.create_task(run_runtime(), name="runtime")

    server = Server(
        application,
        endpoints=[daphne_endpoint(host, port)],
        signal_handlers=False,
        ready_callable=on_ready,
    )
    server.run()
    if "code" in outcome:
        return int(outcome["code"])
    # The reactor stopped before the runtime did: daphne could not listen.
    log.error("site: web server stopped (could not listen on %s:%s?); stopping the runtime", host, port)
    task = outcome.get("task")
    if task is not None:
        runtime.request_stop()
        loop = task.get_loop()
        loop.run_until_complete(task)
    return 1
