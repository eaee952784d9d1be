"""Kill switches and the audit trail of every control change made from the dashboard."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class KillSwitch(models.Model):
    """Stops new entries: globally (account empty) or for one account. Exits still run.

    One row per scope; engaging or releasing updates that row and appends a ControlAudit.
    The trade executor asks dashboard.selectors.entries_halted before every entry.
    """

    # "global", or "account:<id>": one row per scope, enforced by the unique index.
    scope = models.CharField(max_length=40, unique=True)
    account = models.OneToOneField(
        "orders.Account", null=True, blank=True, on_delete=models.CASCADE, related_name="kill_switch"
    )
    engaged = models.BooleanField(default=False)
    reason = models.CharField(max_length=300, blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(scope="global") & models.Q(account__isnull=True))
                | (~models.Q(scope="global") & models.Q(account__isnull=False)),
                name="killswitch_scope_matches_account",
            ),
        ]
        verbose_name_plural = "kill switches"

    def __str__(self) -> str:
        return f"{self.scope}: {'ENGAGED' if self.engaged else 'released'}"


class ControlAction(models.TextChoices):
    STRATEGY_ENABLE = "strategy.enable", "Strategy enabled"
    STRATEGY_DISABLE = "strategy.disable", "Strategy disabled"
    TRADE_SETTING_ENABLE = "trade_setting.enable", "Trade setting enabled"
    TRADE_SETTING_DISABLE = "trade_setting.disable", "Trade setting disabled"
    KILL_SWITCH_ENGAGE = "kill_switch.engage", "Kill switch engaged"
    KILL_SWITCH_RELEASE = "kill_switch.release", "Kill switch released"
    INTENT_RELEASE = "intent.release", "Unresolved order released (the broker never had it)"
    INTENT_KEEP_WAITING = "intent.keep_waiting", "Kept waiting on an unresolved order"
    OWNER_CHANGE = "owner.change", "Owner changed"
    POSITION_CLOSE = "position.close", "Position closed by hand"
    ORDER_CANCEL = "order.cancel", "Order cancelled by hand"
    ACCOUNT_FLATTEN = "account.flatten", "Account flattened by hand"
    MANUAL_ENTRY = "entry.manual", "Entry made by hand"


class ControlAudit(models.Model):
    """One control change: who, what, on which object, from which state to which. Append-only."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_name = models.CharField(max_length=150, help_text="Kept when the user is deleted.")
    action = models.CharField(max_length=40, choices=ControlAction.choices)
    target = models.CharField(max_length=200, help_text="What changed, e.g. 'strategy ema-cross'.")
    # The account the change applies to, when it has one: scopes who may read the row.
    account = models.ForeignKey("orders.Account", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.CharField(max_length=300, blank=True)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.target}"
