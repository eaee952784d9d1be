"""The kill-switch bar: every kill switch the user may throw, pinned in view on every screen size."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from dashboard import selectors


def kill_bar_panel(user: User) -> dict[str, Any]:
    switches = selectors.kill_switches_for_user(user)
    halted = selectors.entries_halted_by_account(user)
    global_switch = switches.get(selectors.GLOBAL_SCOPE)
    accounts = []
    for account in selectors.accounts_for_user(user).order_by("name", "pk"):
        switch = switches.get(selectors.account_scope(account.pk))
        accounts.append(
            {"account": account, "halted": halted.get(account.pk), "switch_engaged": bool(switch and switch.engaged)}
        )
    return {
        "kill_bar_accounts": accounts,
        "kill_bar_global_engaged": bool(global_switch and global_switch.engaged),
    }
