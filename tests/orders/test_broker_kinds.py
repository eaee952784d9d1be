"""Adding a broker kind, as docs/extending.md says: one declaration, seen by the admin, the model and the settings."""

from __future__ import annotations

import io
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client, override_settings

from orders.brokers.kinds import (
    BROKERS,
    PAPER,
    BrokerKind,
    BrokerSetup,
    broker_choices,
    register_broker,
    unregister_broker,
)
from orders.brokers.paper import PaperBroker
from orders.brokers.registry import BrokerNotConfigured
from orders.models import Account
from orders.services import broker_registry_from_settings
from recovery.tokens import TokenKey, TokenKind

pytestmark = pytest.mark.django_db


def _factories(setup: BrokerSetup) -> dict[str, Any]:
    key = setup.settings["THROWAWAY_BROKER_KEY"]
    return {"live": lambda: PaperBroker(account_key=f"throwaway-{key}")}


THROWAWAY = BrokerKind(
    "throwaway",
    "Throwaway venue",
    settings=("THROWAWAY_BROKER_KEY", "ORDERS_BROKER_TIMEOUT_S"),
    required=("THROWAWAY_BROKER_KEY",),
    factories=_factories,
)


@pytest.fixture
def throwaway() -> Iterator[BrokerKind]:
    register_broker(THROWAWAY)
    yield THROWAWAY
    unregister_broker(THROWAWAY.name)


def test_a_registered_kind_is_a_choice_of_the_admin_and_the_model_and_gone_once_unregistered(
    admin_client: Client,
) -> None:
    owner = get_user_model().objects.create_user("o", password="x")
    account = Account(owner=owner, name="T", broker="throwaway", allocated_capital=Decimal(1000))
    register_broker(THROWAWAY)
    try:
        assert ("throwaway", "Throwaway venue") in broker_choices()
        assert (
            b'<option value="throwaway">Throwaway venue</option>'
            in admin_client.get("/admin/orders/account/add/").content
        )
        account.full_clean()
    finally:
        unregister_broker(THROWAWAY.name)
    assert "throwaway" not in BROKERS
    with pytest.raises(ValidationError) as caught:
        account.full_clean()
    assert "broker" in caught.value.message_dict


def test_a_new_kind_needs_no_migration(throwaway: BrokerKind) -> None:
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)  # exits non-zero on a change
    assert "No changes detected" in out.getvalue()


def test_the_broker_registry_builds_it_from_its_settings_only_when_configured(throwaway: BrokerKind) -> None:
    with override_settings(THROWAWAY_BROKER_KEY="k1"):
        registry = broker_registry_from_settings()
    broker = registry.broker_for(account_id=1, venue="throwaway", mode="live")
    assert isinstance(broker, PaperBroker) and broker.exchange.account_key == "throwaway-k1"
    with pytest.raises(BrokerNotConfigured):
        registry.broker_for(account_id=1, venue="throwaway", mode="sandbox")
    with override_settings(THROWAWAY_BROKER_KEY=""):
        unconfigured = broker_registry_from_settings()
    with pytest.raises(BrokerNotConfigured):
        unconfigured.broker_for(account_id=1, venue="throwaway", mode="live")


def test_every_built_in_kind_declares_settings_that_exist() -> None:
    assert [name for name, _ in broker_choices()][:1] == [PAPER]  # the default comes first
    assert {"paper", "binance-usdm", "upstox"} <= set(BROKERS)
    for kind in BROKERS.values():
        for name in kind.settings:
            assert hasattr(settings, name), f"{kind.name} reads a setting that does not exist: {name}"


def test_binance_is_configured_for_both_modes_by_its_key_and_paper_is_always_there() -> None:
    with override_settings(ORDERS_BINANCE_API_KEY=""):
        assert not [key for key in broker_registry_from_settings().factories if key[0] == "binance-usdm"]
    with override_settings(ORDERS_BINANCE_API_KEY="key", ORDERS_BINANCE_API_SECRET="secret"):
        registry = broker_registry_from_settings()
    assert sorted(key for key in registry.factories if key[0] == "binance-usdm") == [
        ("binance-usdm", "live"),
        ("binance-usdm", "sandbox"),
    ]
    assert registry.broker_for(account_id=7, venue=PAPER, mode="paper").name == PAPER


class _SandboxTokensOnly:
    def token_source(self, key: TokenKey) -> object:
        if key != TokenKey("upstox", TokenKind.SANDBOX):
            raise KeyError(key)
        return object()


def test_upstox_is_configured_by_the_tokens_recovery_holds() -> None:
    assert not [key for key in broker_registry_from_settings().factories if key[0] == "upstox"]
    registry = broker_registry_from_settings(auth_state=_SandboxTokensOnly())
    assert [key for key in registry.factories if key[0] == "upstox"] == [("upstox", "sandbox")]


def test_a_kind_whose_declaration_does_not_add_up_is_refused() -> None:
    with pytest.raises(ValueError, match="required"):
        register_broker(BrokerKind("half", "Half", settings=("A",), required=("B",)))
    with pytest.raises(ValueError, match="characters"):
        register_broker(BrokerKind("x" * 21, "Long"))
    with pytest.raises(ValueError, match="registered twice"):
        register_broker(BrokerKind(PAPER, "Another paper"))
    assert BROKERS[PAPER].label == "Paper (simulated exchange)"
