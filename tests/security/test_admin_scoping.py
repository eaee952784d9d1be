"""What each admin list holds for a staff user who is not a superuser, and ownership changes.

The URL walk checks the status of every admin page; this checks the rows behind them:
a staff user holding every model permission but owning nothing lists nothing of the
owner's, the owner lists their own rows, a superuser lists everyone's.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.test import Client

from core.admin_scope import OwnerScopedAdmin, SuperuserOnlyAdmin
from dashboard.admin import OWNER_CHANGE_ACTION, ApiKeyAdmin, ControlAuditAdmin, KillSwitchAdmin
from dashboard.models import ControlAudit
from orders.models import Account
from tests.security.tenant_world import World, world_fixture  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db
SCOPED = (OwnerScopedAdmin, ApiKeyAdmin, KillSwitchAdmin, ControlAuditAdmin)


def changelist_count(client: Client, model: type) -> int:
    opts = model._meta
    response = client.get(f"/admin/{opts.app_label}/{opts.model_name}/")
    assert response.status_code == 200, f"{opts.label}: {response.status_code}"
    return int(response.context["cl"].result_count)


def scoped_models() -> list[Any]:
    return [model for model, model_admin in admin.site._registry.items() if isinstance(model_admin, SCOPED)]


def test_every_admin_is_either_scoped_to_its_owner_or_for_superusers() -> None:
    from processor.admin import StrategyAdmin, StrategyOutputRecordAdmin, StrategySignalAdmin

    by_strategy = (StrategyAdmin, StrategySignalAdmin, StrategyOutputRecordAdmin)
    unscoped = [
        model._meta.label
        for model, model_admin in admin.site._registry.items()
        if not isinstance(model_admin, (*SCOPED, SuperuserOnlyAdmin, *by_strategy))
    ]
    assert unscoped == [], "an admin with no owner scope and no superuser-only rule"


@pytest.mark.parametrize(
    "model", scoped_models() + [m for m in admin.site._registry if m._meta.app_label == "processor"]
)
def test_a_staff_user_lists_none_of_the_owners_rows(world: World, model: type) -> None:
    staff, owner, root = (world.client(role) for role in ("staff", "owner", "root"))
    assert changelist_count(staff, model) == 0
    mine = changelist_count(owner, model)
    assert mine > 0, f"{model._meta.label}: the owner should list their rows"
    assert changelist_count(root, model) >= mine


def test_the_owner_lists_their_account_switch_but_not_the_global_one(world: World) -> None:
    from dashboard.models import KillSwitch

    assert changelist_count(world.client("owner"), KillSwitch) == 1
    assert changelist_count(world.client("root"), KillSwitch) == 2


def test_a_staff_user_adds_accounts_for_themselves_only(world: World) -> None:
    staff = world.client("staff")
    form = {"name": "ops", "broker": "paper", "allocated_capital": "10", "currency": "USDT", "_save": "Save"}
    refused = staff.post("/admin/orders/account/add/", form | {"owner": world.users["other"].pk})
    assert refused.status_code == 200 and "owner" in refused.context["adminform"].form.errors
    assert not Account.objects.filter(name="ops").exists()
    assert staff.post("/admin/orders/account/add/", form | {"owner": world.users["staff"].pk}).status_code == 302
    assert Account.objects.get(name="ops").owner == world.users["staff"]


def test_a_superuser_moving_an_account_is_audited(world: World) -> None:
    account = Account.objects.get(pk=world.ids["account"])
    form = {
        "name": account.name,
        "owner": world.users["staff"].pk,
        "broker": account.broker,
        "allocated_capital": str(account.allocated_capital),
        "currency": account.currency,
        "_save": "Save",
    }
    response = world.client("root").post(f"/admin/orders/account/{account.pk}/change/", form)
    assert response.status_code == 302, response.content
    audit = ControlAudit.objects.get(action=OWNER_CHANGE_ACTION)
    assert (audit.actor, audit.account_id, audit.before, audit.after) == (
        world.users["root"],
        account.pk,
        {"owner_id": world.users["owner"].pk},
        {"owner_id": world.users["staff"].pk},
    )
    # The owner's own edit that keeps the owner writes no ownership audit.
    ControlAudit.objects.filter(action=OWNER_CHANGE_ACTION).delete()
    world.client("root").post(f"/admin/orders/account/{account.pk}/change/", form | {"name": "renamed"})
    assert not ControlAudit.objects.filter(action=OWNER_CHANGE_ACTION).exists()


def test_a_staff_user_cannot_see_another_users_api_key(world: World) -> None:
    page = world.client("staff").get("/admin/authtoken/tokenproxy/").content.decode()
    assert world.ids["api_key"] not in page
    assert world.ids["api_key"] in world.client("owner").get("/admin/authtoken/tokenproxy/").content.decode()


def test_site_wide_third_party_admins_become_superuser_only() -> None:
    """The wrapping the throttling records and the beat schedule get, tried on an installed app."""
    from rest_framework.authtoken.models import TokenProxy

    from dashboard.admin import SITE_WIDE_APPS, _superuser_only_admins

    assert SITE_WIDE_APPS == ("axes", "django_celery_beat")
    registry = dict(admin.site._registry)
    try:
        _superuser_only_admins(("rest_framework.authtoken", "not_installed"))
        wrapped = admin.site._registry[TokenProxy]
        assert isinstance(wrapped, SuperuserOnlyAdmin) and isinstance(wrapped, ApiKeyAdmin)
    finally:
        admin.site._registry.clear()
        admin.site._registry.update(registry)
