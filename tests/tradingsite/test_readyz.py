"""/readyz answers for the process asked: its database and its channel layer, never a 500.

Anonymous callers see status names only; a staff session also sees the reasons.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client

from core import services
from core.health import Health, ProcessIdentity, Status
from feeds.models import Feed
from tests.helpers import eventually

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db


def ready_lines() -> bytes:
    """The anonymous body of a ready process: the channel layer is checked only when shared (Redis)."""
    return b"ready\ndatabase: HEALTHY\n" + (b"channel-layer: HEALTHY\n" if django_settings.REDIS_URL else b"")


def closed_port() -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_dead_feed_process_does_not_make_the_web_not_ready(client: Client) -> None:
    Feed.objects.create(name="sim", venue="sim", market_type="spot")  # expected, no process: BLOCKED site-wide
    dead = ProcessIdentity("h", 1, "x", "runfeed", "feed:sim")
    services.component_health_report(
        process=dead, health={"orders:executor": Health(Status.BLOCKED, "stopped")}, default_stale_after_s=15
    )
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.content == ready_lines()


def test_anonymous_callers_get_status_names_only_staff_get_details(client: Client) -> None:
    get_user_model().objects.create_user("alice", password="x")
    services.component_health_report(
        process="p",
        health={"orders:executor": Health(Status.HEALTHY, "last client order id ts-abc-1; alice")},
        default_stale_after_s=15,
    )
    anonymous = client.get("/readyz").content.decode()
    assert anonymous == ready_lines().decode()
    for secret in ("ts-abc-1", "alice", "reachable", "account", str(os.getpid())):
        assert secret not in anonymous

    client.force_login(get_user_model().objects.create_user("plain", password="x"))
    assert client.get("/readyz").content.decode() == anonymous  # a login is not enough: staff only

    client.force_login(get_user_model().objects.create_user("ops", password="x", is_staff=True))
    staff = client.get("/readyz").content.decode()
    assert staff.startswith("ready\ndatabase: HEALTHY reachable\n")
    assert f"process: {socket.gethostname()}:{os.getpid()}" in staff
    assert "/internal/health" in staff and "ts-abc-1" not in staff


def test_probes_bypass_the_session_middleware_and_head_works(client: Client) -> None:
    assert django_settings.MIDDLEWARE.index("core.probes.ProbeMiddleware") < django_settings.MIDDLEWARE.index(
        "django.contrib.sessions.middleware.SessionMiddleware"
    )
    assert client.head("/readyz").status_code == 200
    assert client.get("/healthz").content == b"ok\n"
    assert client.post("/readyz").status_code == 405  # not a probe: the view's method guard answers


def test_an_unreachable_channel_layer_makes_this_process_not_ready(client: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.READYZ_TIMEOUT_S = 2.0
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": f"redis://127.0.0.1:{closed_port()}/0", "socket_connect_timeout": 1}]},
        }
    }
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.content == b"not ready\ndatabase: HEALTHY\nchannel-layer: BLOCKED\n"
    client.force_login(get_user_model().objects.create_user("ops", password="x", is_staff=True))
    assert b"channel-layer: BLOCKED unreachable: ConnectionError" in client.get("/readyz").content


@pytest.mark.needs_redis
def test_the_redis_channel_layer_is_checked_by_a_real_round_trip(client: Client) -> None:
    client.force_login(get_user_model().objects.create_user("ops", password="x", is_staff=True))
    response = client.get("/readyz")
    assert response.status_code == 200
    assert b"channel-layer: HEALTHY round trip in " in response.content


REFUSED_PROBE = textwrap.dedent(
    """
    import django
    django.setup()
    from django.conf import settings
    from django.test import Client
    from django.test.utils import setup_test_environment
    setup_test_environment()
    client = Client(raise_request_exception=False)
    client.cookies[settings.SESSION_COOKIE_NAME] = "k" * 32  # a logged-in caller's cookie
    for path in ("/readyz", "/healthz"):
        response = client.get(path)
        print(path, response.status_code, response.content.decode().replace(chr(10), "|"))
    """
)


def test_readyz_is_503_not_500_when_the_database_refuses_connections() -> None:
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed_port()}/nothing",
        "DJANGO_SETTINGS_MODULE": "tradingsite.settings",
        "REDIS_URL": "",
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run(
        [sys.executable, "-c", REFUSED_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "/readyz 503 not ready|database: BLOCKED|" in lines
    assert "/healthz 200 ok|" in lines


class TcpGate:
    """A TCP forwarder to PostgreSQL that the test can shut: then every connect is refused."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def shut(self) -> None:
        # shutdown() first: a close() alone leaves a socket blocked in accept() listening.
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for sock in self.sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()


def _get(url: str, cookie: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.needs_postgres
@pytest.mark.django_db(transaction=True)
def test_a_logged_in_readyz_on_daphne_is_503_when_postgresql_goes_away() -> None:
    db = django_settings.DATABASES["default"]
    gate = TcpGate((db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)))
    staff = get_user_model().objects.create_user("ops", password="x", is_staff=True)
    client = Client()
    client.force_login(staff)
    cookie = f"{django_settings.SESSION_COOKIE_NAME}={client.cookies[django_settings.SESSION_COOKIE_NAME].value}"
    port = 8200 + int(os.environ.get("READYZ_TEST_PORT_OFFSET", "11"))
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD']}@127.0.0.1:{gate.port}/{db['NAME']}",
        "REDIS_URL": "",
        "PYTHONPATH": str(ROOT),
    }
    web = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "tradingsite.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def answers() -> tuple[int, str] | None:
            assert web.poll() is None, web.stderr.read() if web.stderr else "daphne exited"
            try:
                return _get(f"{base}/readyz", cookie)
            except OSError:
                return None

        status, body = eventually(answers, timeout_s=60, interval_s=0.2)
        assert status == 200 and "database: HEALTHY reachable" in body  # the staff session was read
        gate.shut()
        status, body = _get(f"{base}/readyz", cookie)
        assert (status, body.splitlines()[:2]) == (503, ["not ready", "database: BLOCKED"])
        assert _get(f"{base}/healthz", cookie) == (200, "ok\n")
    finally:
        web.terminate()
        web.wait(timeout=20)
        gate.shut()


async def test_under_asgi_the_probe_answers_and_other_requests_pass_through(async_client) -> None:  # type: ignore[no-untyped-def]
    ready = await async_client.get("/readyz")
    assert (ready.status_code, ready.content) == (200, ready_lines())
    assert (await async_client.get("/healthz")).content == b"ok\n"
    assert (await async_client.get("/")).status_code == 302  # the rest of the chain: the login redirect
