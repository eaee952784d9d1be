"""The web processes: daphne alone (runweb) or daphne and the runtime on one loop (runsite).

Daphne runs Twisted's asyncio reactor (on uvloop where it is installed); the runtime
starts on that same loop from daphne's ready callback, so the in-memory channel layer
reaches the websockets.
On SIGINT/SIGTERM both close every open websocket with 1001 (going away) before the
reactor stops, so a browser reconnects to another web process at once and re-syncs,
instead of seeing 1006 (abnormal closure) from a dropped socket.
The runtime owns the lifetime: when it stops (signal or fatal error) the reactor
stops; when the reactor stops first (it could not listen) the runtime is stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from core.runtime.core import Runtime
from core.runtime.signals import new_fast_loop, stop_on_signals

log = logging.getLogger(__name__)

GOING_AWAY = 1001
# How long a stopping web process waits for clients to answer its close frames.
CLOSE_GRACE_S = 2.0


@dataclass(frozen=True)
class ProxyHeaders:
    """Trust a TLS proxy's X-Forwarded-For/-Port/-Proto for the client address and scheme."""

    address: str = "X-Forwarded-For"
    port: str = "X-Forwarded-Port"
    proto: str = "X-Forwarded-Proto"


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


def open_websockets(server: Any) -> list[Any]:
    """The open websocket connections of a daphne Server."""
    from daphne.ws_protocol import WebSocketProtocol

    return [
        protocol
        for protocol in list(getattr(server, "connections", {}))
        if isinstance(protocol, WebSocketProtocol) and protocol.state == protocol.STATE_OPEN
    ]


async def close_websockets_going_away(server: Any, *, grace_s: float = CLOSE_GRACE_S) -> int:
    """Send 1001 to every open websocket and wait (up to grace_s) for the closing handshakes.

    Runs on the reactor's loop. Returns how many sockets were sent a close frame.
    """
    closing = open_websockets(server)
    for protocol in closing:
        # autobahn's sendClose accepts only 1000 and 3000-4999; 1001 is a valid server code.
        protocol.sendCloseFrame(code=GOING_AWAY, reasonUtf8=b"server restarting", isReply=False)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.state != p.STATE_CLOSED for p in closing):
        await asyncio.sleep(0.02)
    if closing:
        log.info("web: closed %d websocket(s) with %d (going away)", len(closing), GOING_AWAY)
    return len(closing)


def _server(application: Any, host: str, port: int, proxy: ProxyHeaders | None, on_ready: Any) -> Any:
    from daphne.server import Server  # after install_reactor: keeps the reactor installed there

    return Server(
        application,
        endpoints=[daphne_endpoint(host, port)],
        signal_handlers=False,
        ready_callable=on_ready,
        proxy_forwarded_address_header=proxy.address if proxy else None,
        proxy_forwarded_port_header=proxy.port if proxy else None,
        proxy_forwarded_proto_header=proxy.proto if proxy else None,
    )


def serve_web(
    application: Any, *, host: str, port: int, proxy: ProxyHeaders | None = None, grace_s: float = CLOSE_GRACE_S
) -> int:
    """Serve `application` with daphne until SIGINT/SIGTERM; close websockets with 1001 first."""
    install_reactor()
    from twisted.internet import reactor

    holder: dict[str, Any] = {}

    async def stop() -> None:
        try:
            await close_websockets_going_away(holder["server"], grace_s=grace_s)
        except Exception:
            log.exception("web: closing websockets failed; stopping anyway")
        finally:
            if reactor.running:
                reactor.stop()  # type: ignore[misc]  # twisted's reactor is a module typed as a class

    def request_stop() -> None:
        if "stopping" not in holder:
            holder["stopping"] = asyncio.get_event_loop().create_task(stop(), name="web-stop")

    def on_ready() -> None:
        loop = asyncio.get_event_loop()
        log.info("web: serving on %s:%s (%s loop)", host, port, type(loop).__module__.split(".")[0])
        stop_on_signals(loop, request_stop)

    holder["server"] = _server(application, host, port, proxy, on_ready)
    holder["server"].run()
    if "stopping" in holder:
        return 0
    log.error("web: server stopped (could not listen on %s:%s?)", host, port)
    return 1


def serve_with_runtime(application: Any, runtime: Runtime, *, host: str, port: int) -> int:
    """Serve `application` on host:port while `runtime` runs; return the exit code."""
    install_reactor()
    from twisted.internet import reactor

    outcome: dict[str, Any] = {}

    async def run_runtime() -> None:
        outcome["code"] = await runtime.run()
        try:
            await close_websockets_going_away(outcome["server"])
        except Exception:
            log.exception("site: closing websockets failed; stopping anyway")
        if reactor.running:
            reactor.stop()  # type: ignore[misc]  # twisted's reactor is a module typed as a class

    def on_ready() -> None:
        loop = asyncio.get_event_loop()
        log.info("site: web and runtime on %s", type(loop).__module__.split(".")[0])
        stop_on_signals(loop, runtime.request_stop)
        outcome["task"] = loop.create_task(run_runtime(), name="runtime")

    server = outcome["server"] = _server(application, host, port, None, on_ready)
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
