from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.feeds.venues.fake_http import FakeVenueHttp, running_fake_http


@pytest.fixture
async def fake_http() -> AsyncIterator[FakeVenueHttp]:
    async for fake in running_fake_http():
        yield fake
