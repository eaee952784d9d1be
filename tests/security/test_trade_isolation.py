"""The trade history and performance pages and API routes show each user only their own trades."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.tenant_world import World, world_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db

PAGES = ["/trades/", "/trades/export.csv", "/performance/", "/api/trades/", "/api/performance/"]


def _body(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


@pytest.mark.parametrize("role", ["other", "staff"])
def test_no_one_else_sees_the_owners_closed_trade(world: World, role: str) -> None:
    client = world.client(role)
    assert client.get("/api/trades/").json()["count"] == 0
    assert client.get("/api/performance/").json()["summary"]["trades"] == 0
    assert client.get(f"/api/trades/{world.ids['trade']}/").status_code == 404
    for path in ("/trades/", f"/trades/?account={world.ids['account']}"):
        response = client.get(path)
        assert response.status_code == 200 and response.context["total"] == 0, path
        assert "No closed trades" in response.content.decode(), path
    csv_lines = _body(client.get("/trades/export.csv")).strip().splitlines()
    assert len(csv_lines) == 1  # the header only
    # The owner's account is not offered as a filter choice either.
    assert f'value="{world.ids["account"]}"' not in _body(client.get("/performance/"))


def test_the_owner_sees_it_everywhere(world: World) -> None:
    client = world.client("owner")
    assert client.get("/api/trades/").json()["count"] == 1
    assert client.get("/api/performance/").json()["summary"]["net_pnl"] == "9.8"
    assert client.get("/trades/").context["total"] == 1
    assert len(_body(client.get("/trades/export.csv")).strip().splitlines()) == 2
    assert f'value="{world.ids["account"]}"' in _body(client.get("/performance/"))
