"""Row leases that serialize entries per account and instrument across processes."""

from __future__ import annotations

from django.db import models


class EntryLock(models.Model):
    """A lease on `scope` of one account, held by `owner` until `expires_at`.

    Scopes: "entry:<instrument id>" for the entry/exit flow of one instrument, and
    "reconcile" for the account's reconciliation pass. Taken and released with
    conditional UPDATEs (orders.locks), which behave the same on SQLite and PostgreSQL
    and, unlike advisory locks, survive connection pooling.
    """

    account = models.ForeignKey("orders.Account", on_delete=models.CASCADE, related_name="locks")
    scope = models.CharField(max_length=40)
    owner = models.CharField(max_length=40, blank=True)
    expires_at = models.DateTimeField()
    acquired_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "scope"], name="entrylock_unique_scope")]

    def __str__(self) -> str:
        return f"{self.scope} of account {self.account_id}"
