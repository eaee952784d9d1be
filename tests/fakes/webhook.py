"""A webhook receiver on 127.0.0.1, as apprise's json:// and form:// targets POST to it.

apprise's JSON payload is `{"version": "1.0", "title": ..., "message": ..., "type": "info", ...}`
with `Content-Type: application/json`. The receiver answers the statuses it is given in
turn (then 200), and records every request it accepted. `port` is fixed at construction,
so a test can point a channel at it before it listens (the connection is refused).
"""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class FakeWebhook:
    statuses: list[int] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    received: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"json://127.0.0.1:{self.port}/hook"

    def start(self) -> FakeWebhook:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                status = hook.statuses.pop(0) if hook.statuses else 200
                if status == 200:
                    hook.received.append({"path": self.path, "body": json.loads(raw or b"{}")})
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
