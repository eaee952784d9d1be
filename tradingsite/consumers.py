"""The dashboard websocket: refuses anonymous users, joins the market and per-user groups."""
from __future__ import annotations

from typing import Any

import orjson
from channels.generic.websocket import AsyncWebsocketConsumer

from feeds.publisher import MARKET_GROUP

CLOSE_UNAUTHENTICATED = 4401


def user_group(user_id: int) -> str:
    """The group that carries one user's private events (orders, prompts, ledger)."""
    return f"user.{user_id}"


class DashboardConsumer(AsyncWebsocketConsumer):
    groups_joined: list[str]

    async def connect(self) -> None:
        self.groups_joined = []
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            # Accept first so the browser sees our close code instead of a failed handshake.
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.groups_joined = [MARKET_GROUP, user_group(user.pk)]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """The dashboard is push-only; anything a browser sends is ignored."""

    async def market_prices(self, event: dict[str, Any]) -> None:
        await self.send(text_data=orjson.dumps({"type": "prices", "prices": event["prices"]}).decode())

    async def recovery_prompt(self, event: dict[str, Any]) -> None:
        """An auth prompt opened or cleared (recovery.push); carries no token."""
        payload = {key: value for key, value in event.items() if key != "type"}
        await self.send(text_data=orjson.dumps({"type": "prompt", **payload}).decode())

    async def strategy_output(self, event: dict[str, Any]) -> None:
        """Latest strategy outputs, conflated per strategy and instrument (processor.publishing)."""
        await self.send(text_data=orjson.dumps({"type": "strategy.output", "outputs": event["outputs"]}).decode())

    async def strategy_signal(self, event: dict[str, Any]) -> None:
        """Entries and exits emitted since the previous push (processor.publishing)."""
        await self.send(text_data=orjson.dumps({"type": "strategy.signal", "signals": event["signals"]}).decode())
