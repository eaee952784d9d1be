"""Broker kinds: every venue an account can trade through, each declared once.

A kind names itself (the value stored in Account.broker), labels itself for the admin,
lists the settings it is built from (and which of them must be set for it to be
configured at all) and says how its brokers are built from them, one factory per
trade mode. Each broker module registers its kind with `register_broker`; the orders
app imports them when it is ready. The Account.broker choices are read from here
through a callable, so a new kind needs no migration, and
`orders.services.broker_registry_from_settings` builds every configured kind the same way.

This module imports nothing of the orders app: the Account model imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings

PAPER = "paper"
# The Account.broker column is this wide.
NAME_MAX_LENGTH = 20

BrokerFactory = Callable[[], Any]  # builds an orders.brokers.base.Broker (not imported here; see above)


@dataclass(frozen=True)
class BrokerSetup:
    settings: Mapping[str, Any]  # the kind's declared settings, by name
    auth_state: Any = None  # recovery's token state, in a process that runs recovery


@dataclass(frozen=True)
class BrokerKind:
    name: str
    label: str
    settings: tuple[str, ...] = ()  # every Django setting `factories` reads
    required: tuple[str, ...] = ()  # those that must be non-empty, or the kind is not configured
    # Trade mode -> factory, for the modes this setup configures. None: BrokerRegistry
    # builds it itself, one per account (paper keeps a book per account).
    factories: Callable[[BrokerSetup], Mapping[str, BrokerFactory]] | None = None


BROKERS: dict[str, BrokerKind] = {}


def register_broker(kind: BrokerKind) -> BrokerKind:
    if not 0 < len(kind.name) <= NAME_MAX_LENGTH:
        raise ValueError(f"broker name must be 1 to {NAME_MAX_LENGTH} characters, not {kind.name!r}")
    if not set(kind.required) <= set(kind.settings):
        raise ValueError(f"broker {kind.name!r}: required settings must be among its settings")
    if BROKERS.get(kind.name, kind) != kind:
        raise ValueError(f"broker kind {kind.name!r} is registered twice")
    BROKERS[kind.name] = kind
    return kind


def unregister_broker(name: str) -> None:
    """Forget `name` (tests that register a throwaway kind)."""
    BROKERS.pop(name, None)


def broker_kind(name: str) -> BrokerKind:
    try:
        return BROKERS[name]
    except KeyError:
        raise LookupError(f"unknown broker {name!r}; known: {sorted(BROKERS)}") from None


def broker_choices() -> list[tuple[str, str]]:
    """The Account.broker choices: paper (the default) first, then by name."""
    return [
        (kind.name, kind.label) for kind in sorted(BROKERS.values(), key=lambda kind: (kind.name != PAPER, kind.name))
    ]


def configured_factories(kind: BrokerKind, *, auth_state: Any = None) -> dict[tuple[str, str], BrokerFactory]:
    """(name, mode) -> factory for the modes `kind` is configured for in this deployment."""
    if kind.factories is None:
        return {}
    values = {name: getattr(django_settings, name) for name in kind.settings}
    if not all(values[name] for name in kind.required):
        return {}
    built = kind.factories(BrokerSetup(values, auth_state))
    return {(kind.name, mode): factory for mode, factory in built.items()}
