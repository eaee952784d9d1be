"""`runserver` is `runsite` here, so the command Django users type first serves the live
dashboard (websockets, feeds, periodic jobs) rather than a WSGI page without them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from tradingsite.management.commands.runsite import Command as RunSite


class Command(RunSite):
    help = "Same as runsite; accepts Django's [addr:]port argument."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("addrport", nargs="?", help="Optional port number, or ipaddr:port.")

    def handle(self, *args: Any, addrport: str | None = None, **options: Any) -> None:
        if addrport:
            host, _, port = addrport.rpartition(":")
            if not port.isdigit():
                raise CommandError(f"{addrport!r} is not a port number or address:port pair")
            options["port"] = int(port)
            if host:
                options["host"] = host
        super().handle(*args, **options)
