"""Manage feeds without the admin: add, list, enable, disable."""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from feeds.models import Feed, Instrument, MarketType, Subscription
from feeds.venues import VENUES

# Settings keys the URL overrides fill; the venue validates them like any other setting.
WS_URL_KEY = "ws_url"
REST_URL_KEY = "rest_url"


def _decimal(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise CommandError(f"not a decimal number: {text!r}") from None
    if not value > 0:
        raise CommandError(f"must be positive: {text!r}")
    return value


def _setting(item: str) -> tuple[str, object]:
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise CommandError(f"--setting wants KEY=VALUE, got {item!r}")
    try:
        value: object = json.loads(text)
    except ValueError:
        value = text  # plain text: a string setting
    return key.strip(), value


class Command(BaseCommand):
    help = "Add, list, enable or disable feeds."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{add,list,enable,disable}")
        add = actions.add_parser(
            "add", help="Create a feed with its instruments, subscribed to trades (or the venue's channels without)."
        )
        add.add_argument("name")
        add.add_argument("--venue", required=True, help=f"One of: {', '.join(sorted(VENUES))}.")
        add.add_argument("--symbols", required=True, help="Venue symbols, comma-separated (BTCUSDT,ETHUSDT).")
        add.add_argument("--ws-url", help="Replace the venue's websocket base URL (testnet, local fake).")
        add.add_argument("--rest-url", help="Replace the venue's REST base URL.")
        add.add_argument(
            "--setting",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="Another venue setting, VALUE as JSON or plain text (demo=true, api_version=v2); repeatable.",
        )
        add.add_argument("--market-type", choices=MarketType.values)
        add.add_argument("--tick-size", default="0.00000001", help="Informational price tick (default 1e-8).")
        add.add_argument("--lot-size", default="0.00000001", help="Informational quantity step (default 1e-8).")
        add.add_argument("--disabled", action="store_true", help="Create it disabled.")
        actions.add_parser("list", help="Show every feed, its venue, state and symbols.")
        for verb in ("enable", "disable"):
            sub = actions.add_parser(verb, help=f"{verb.capitalize()} a feed (runfeed/runsite pick it up on restart).")
            sub.add_argument("name")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        if action == "add":
            self._add(**options)
        elif action == "list":
            self._list()
        else:
            self._set_enabled(options["name"], action == "enable")

    def _add(
        self,
        *,
        name: str,
        venue: str,
        symbols: str,
        ws_url: str | None,
        rest_url: str | None,
        market_type: str | None,
        tick_size: str,
        lot_size: str,
        disabled: bool,
        setting: list[str] | None = None,
        **_: Any,
    ) -> None:
        if venue not in VENUES:
            raise CommandError(f"unknown venue {venue!r}; known: {', '.join(sorted(VENUES))}")
        venue_symbols = [s.strip() for s in symbols.split(",") if s.strip()]
        if not venue_symbols:
            raise CommandError("--symbols needs at least one symbol")
        if len(set(venue_symbols)) != len(venue_symbols):
            raise CommandError("--symbols names a symbol twice")
        if Feed.objects.filter(name=name).exists():
            raise CommandError(f"a feed named {name} already exists")
        settings: dict[str, object] = dict(_setting(item) for item in setting or [])
        if ws_url:
            settings[WS_URL_KEY] = ws_url
        if rest_url:
            settings[REST_URL_KEY] = rest_url
        feed = Feed(
            name=name,
            venue=venue,
            enabled=not disabled,
            settings=settings,
            market_type=market_type or MarketType(VENUES[venue].default_market_type),
        )
        tick, lot = _decimal(tick_size), _decimal(lot_size)
        # A venue without trades (Tabdeal: order books only) is subscribed to what it serves.
        channels = ["trades"] if "trades" in VENUES[venue].channels else sorted(VENUES[venue].channels)
        try:
            feed.full_clean()
            with transaction.atomic():
                feed.save()
                for venue_symbol in venue_symbols:
                    instrument = Instrument(
                        feed=feed,
                        # Venue spellings may hold spaces ("Oil - Brent"); symbols may not.
                        symbol="".join(venue_symbol.upper().split()),
                        venue_symbol=venue_symbol,
                        tick_size=tick,
                        lot_size=lot,
                    )
                    instrument.full_clean()
                    instrument.save()
                    for channel in channels:
                        Subscription.objects.create(instrument=instrument, channel=channel)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        state = "disabled" if disabled else "enabled"
        self.stdout.write(f"feed {name}: added ({venue}, {state}) with {', '.join(venue_symbols)}")

    def _list(self) -> None:
        feeds = Feed.objects.prefetch_related("instruments").order_by("name")
        if not feeds:
            self.stdout.write("no feeds; add one with `manage.py feed add NAME --venue VENUE --symbols A,B`")
            return
        self.stdout.write(f"{'name':20} {'venue':16} {'state':9} symbols")
        for feed in feeds:
            symbols = ",".join(i.venue_symbol for i in feed.instruments.all()) or "-"
            urls = " ".join(
                f"{key}={feed.settings[key]}" for key in (WS_URL_KEY, REST_URL_KEY) if feed.settings.get(key)
            )
            state = "enabled" if feed.enabled else "disabled"
            self.stdout.write(f"{feed.name:20} {feed.venue:16} {state:9} {symbols}{' ' + urls if urls else ''}")

    def _set_enabled(self, name: str, enabled: bool) -> None:
        updated = Feed.objects.filter(name=name).update(enabled=enabled)
        if not updated:
            raise CommandError(f"no feed named {name}")
        self.stdout.write(
            f"feed {name}: {'enabled' if enabled else 'disabled'} (takes effect when its runtime restarts)"
        )
