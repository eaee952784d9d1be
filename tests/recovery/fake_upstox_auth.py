"""A local fake of Upstox's login endpoints: a real HTTP server on 127.0.0.1.

Speaks the requests and error envelopes of Upstox's "Authorize" and "Get Token" API pages:
- GET  /v2/login/authorization/dialog?response_type=code&client_id&redirect_uri&state
       -> 302 <redirect_uri>?code=...&state=... (the user "logs in" at once), or
          400 UDAPI100068 when client_id / redirect_uri are wrong.
- POST /v2/login/authorization/token, application/x-www-form-urlencoded
       code, client_id, client_secret, redirect_uri, grant_type=authorization_code
       -> 200 profile + access_token (+ extended_token). A code is spent by the first
          attempt, successful or not. Wrong client id / secret -> 401 UDAPI100016;
          wrong redirect_uri -> 400 UDAPI100068; bad or spent code -> 400 UDAPI100036.
- GET  /v2/user/profile with Authorization: Bearer -> 200, or 401 UDAPI100050.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

DIALOG_PATH = "/v2/login/authorization/dialog"
TOKEN_PATH = "/v2/login/authorization/token"
PROFILE_PATH = "/v2/user/profile"


def error_body(code: str, message: str, property_path: str | None = None) -> bytes:
    return json.dumps(
        {
            "status": "error",
            "errors": [{"errorCode": code, "message": message, "propertyPath": property_path, "invalidValue": None}],
        }
    ).encode()


def jwt_like_token() -> str:
    """Upstox access tokens are JWTs; shape ours the same so leak scans are realistic."""

    def part(payload: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': secrets.token_hex(8), 'n': secrets.token_hex(16)})}.{secrets.token_urlsafe(32)}"


@dataclass
class FakeUpstoxAuth:
    client_id: str
    client_secret: str
    redirect_uri: str
    codes: dict[str, bool] = field(default_factory=dict)  # code -> spent
    tokens: set[str] = field(default_factory=set)  # access tokens that work
    issued: list[str] = field(default_factory=list)  # every access token ever issued
    token_requests: list[dict[str, str]] = field(default_factory=list)
    # (HTTP status, errorCode) for the next token call, to play broker outages.
    fail_next_token: tuple[int, str] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- what a user at the broker would do --
    def log_in(self) -> str:
        """Return a fresh authorization code, as the login dialog's redirect would carry."""
        code = secrets.token_urlsafe(6)
        with self._lock:
            self.codes[code] = False
        return code

    def revoke_all(self) -> None:
        with self._lock:
            self.tokens.clear()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeUpstoxAuth:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                return

            def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                if body:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path == DIALOG_PATH:
                    fake._dialog(self, query)
                elif url.path == PROFILE_PATH:
                    fake._profile(self)
                else:
                    self._send(404, error_body("UDAPI10000", "This request is not supported by Upstox API"))

            def do_POST(self) -> None:
                if urlsplit(self.path).path != TOKEN_PATH:
                    self._send(404, error_body("UDAPI10000", "This request is not supported by Upstox API"))
                    return
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode()
                fake._token(self, raw)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="fake-upstox-auth", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- endpoints --
    def _dialog(self, handler: Any, query: dict[str, str]) -> None:
        if query.get("client_id") != self.client_id or query.get("redirect_uri") != self.redirect_uri:
            handler._send(
                400, error_body("UDAPI100068", "Check your 'client_id' and 'redirect_uri'; one or both are incorrect.")
            )
            return
        if query.get("response_type") != "code":
            handler._send(400, error_body("UDAPI100036", "Invalid Input", "response_type"))
            return
        params = {"code": self.log_in()}
        if "state" in query:
            params["state"] = query["state"]
        handler._send(302, headers={"Location": f"{self.redirect_uri}?{urlencode(params)}"})

    def _token(self, handler: Any, raw: str) -> None:
        if handler.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            handler._send(400, error_body("UDAPI100036", "Invalid Input", "Content-Type"))
            return
        form = {k: v[0] for k, v in parse_qs(raw).items()}
        code = form.get("code", "")
        with self._lock:
            self.token_requests.append({k: v for k, v in form.items() if k != "client_secret"})
            known = code in self.codes and not self.codes[code]
            if code in self.codes:
                self.codes[code] = True  # single use, whatever happens next
            failure, self.fail_next_token = self.fail_next_token, None
        if failure is not None:
            handler._send(failure[0], error_body(failure[1], "injected failure"))
            return
        if form.get("client_id") != self.client_id or form.get("client_secret") != self.client_secret:
            handler._send(401, error_body("UDAPI100016", "Invalid Credentials"))
            return
        if form.get("redirect_uri") != self.redirect_uri:
            handler._send(
                400, error_body("UDAPI100068", "Check your 'client_id' and 'redirect_uri'; one or both are incorrect.")
            )
            return
        if form.get("grant_type") != "authorization_code":
            handler._send(400, error_body("UDAPI100036", "Invalid Input", "grant_type"))
            return
        if not known:
            handler._send(400, error_body("UDAPI100036", "Invalid Input", "code"))
            return
        token = jwt_like_token()
        with self._lock:
            self.tokens.add(token)
            self.issued.append(token)
        profile = {
            "email": "trader@example.com",
            "exchanges": ["NSE", "BSE"],
            "products": ["D", "I"],
            "broker": "UPSTOX",
            "user_id": "AB1234",
            "user_name": "Test Trader",
            "order_types": ["MARKET", "LIMIT"],
            "user_type": "individual",
            "poa": False,
            "is_active": True,
            "access_token": token,
            "extended_token": jwt_like_token(),
        }
        handler._send(200, json.dumps(profile).encode())

    def _profile(self, handler: Any) -> None:
        header = handler.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ").strip()
        with self._lock:
            valid = token in self.tokens
        if not valid:
            handler._send(401, error_body("UDAPI100050", "Invalid token used to access API"))
            return
        handler._send(200, json.dumps({"status": "success", "data": {"user_id": "AB1234"}}).encode())
