"""Login forms that refuse an over-long username before anything stores it.

Django's AuthenticationForm sets the username field's max_length after the field is
built, so the limit is only an HTML attribute: an over-long name reaches
`authenticate()`, and the login throttle then writes it into its attempt table (a
255-character column on PostgreSQL: a 500). Here the limit is a validator, so such a
login is a form error like any wrong password, and nothing is recorded for it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator


def _bound_username(form: AuthenticationForm) -> None:
    field = form.fields["username"]
    limit = getattr(field, "max_length", None)
    if limit and not any(isinstance(v, MaxLengthValidator) for v in field.validators):
        field.validators.append(MaxLengthValidator(limit))


class SiteAuthenticationForm(AuthenticationForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _bound_username(self)


class SiteAdminAuthenticationForm(AdminAuthenticationForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _bound_username(self)
