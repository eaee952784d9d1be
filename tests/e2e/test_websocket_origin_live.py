"""The origin check in the real server: `manage.py runsite` (the e2e site) decides from
the Host and Origin headers a real client sends, so another port or host is refused at
the handshake and the site's own origin streams."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import re
import threading
import urllib.parse
import urllib.request
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from tests.e2e.conftest import PASSWORD, Site

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run in a thread of its own: the browser tests' Playwright loop may own this one."""
    out: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            out.append(asyncio.run(coroutine))
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return out[0]


def session_cookie(base: str, username: str = "bob") -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/login/").read().decode()
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert match is not None
    form = urllib.parse.urlencode({"username": username, "password": PASSWORD, "csrfmiddlewaretoken": match.group(1)})
    opener.open(urllib.request.Request(f"{base}/login/", data=form.encode(), headers={"Referer": f"{base}/login/"}))
    return "; ".join(f"{c.name}={c.value}" for c in jar)


async def first_message(url: str, cookie: str, origin: str) -> dict[str, object]:
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": origin}) as socket_:
        return dict(json.loads(await asyncio.wait_for(socket_.recv(), timeout=20)))


async def refused(url: str, cookie: str, origin: str) -> int:
    with pytest.raises(InvalidStatus) as caught:
        async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": origin}):
            pass
    return int(caught.value.response.status_code)


def test_the_real_server_refuses_another_port_or_host_and_streams_to_its_own_origin(site: Site) -> None:
    cookie = session_cookie(site.base)
    port = urlsplit(site.base).port
    url = site.base.replace("http://", "ws://") + "/ws/dashboard/"
    for origin in [f"http://127.0.0.1:{port + 1}", "http://localhost:1234", f"https://127.0.0.1:{port}"]:
        assert run(refused(url, cookie, origin)) == 403, origin
    assert "type" in run(first_message(url, cookie, site.base))
