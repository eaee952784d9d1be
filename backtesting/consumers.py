"""ws/backtests/: live progress of the user's own backtest runs (login required, the user's group only).

Browser messages: {"type": "backtest.progress", "run": {id, status, ticks_done, ticks_total, progress, error}}
and {"type": "backtest.sweep", "sweep": {id, status, points_done, points_total, progress, error}}.
The browser sends nothing; what it sends is ignored.
"""

from __future__ import annotations

from typing import Any

import orjson
from channels.generic.websocket import AsyncWebsocketConsumer

from backtesting.push import PROGRESS_TYPE, SWEEP_TYPE, backtest_group

CLOSE_UNAUTHENTICATED = 4401


class BacktestProgressConsumer(AsyncWebsocketConsumer):
    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Accept first so the browser sees the close code instead of a failed handshake.
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.group = backtest_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        return

    async def backtest_progress(self, event: dict[str, Any]) -> None:
        await self.send(text_data=orjson.dumps({"type": PROGRESS_TYPE, "run": event["run"]}).decode())

    async def backtest_sweep(self, event: dict[str, Any]) -> None:
        await self.send(text_data=orjson.dumps({"type": SWEEP_TYPE, "sweep": event["sweep"]}).decode())
