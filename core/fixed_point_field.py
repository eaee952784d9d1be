"""The model field for the project's fixed-point numbers (value x core.fixed_point.SCALE).

Python sees plain ints on both databases; the column is what differs:

* PostgreSQL: numeric(38,0), exact for every value in the documented range
  (|value| <= core.fixed_point.FIXED_MAX_ABS, 30 digits) with 8 digits to spare for
  notionals, and SUM() over numeric never overflows.
* SQLite (the embedded single-process default): a 64-bit INTEGER. SQLite has no exact
  type wider than int64 (a DECIMAL column turns 10**25 + 1 into a REAL), so there the
  range is the narrower |value| <= SQLITE_FIXED_MAX_ABS (9,223,372.036854775807 at 12
  places). A value outside it is refused with FixedPointRangeError before it reaches
  SQLite, which would otherwise raise an OverflowError or, in arithmetic, silently
  turn it into a float. SUM() over SQLite integers is exact, and raises rather than
  rounds if the total leaves int64.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from core.fixed_point import FIXED_MAX_ABS, SQLITE_FIXED_MAX_ABS, FixedPointError, fixed_to_str

POSTGRES_TYPE = "numeric(38,0)"


class FixedPointRangeError(FixedPointError, OverflowError):
    """A fixed-point value the database's column cannot hold exactly.

    Also an OverflowError: writers that refuse a row name it `out_of_range`, the same
    as a value the database itself finds too large.
    """


def max_abs_for(connection: BaseDatabaseWrapper) -> int:
    """The largest magnitude a fixed-point column holds on this database."""
    return FIXED_MAX_ABS if connection.vendor == "postgresql" else SQLITE_FIXED_MAX_ABS


class FixedPointField(models.Field):  # type: ignore[type-arg]  # Field is generic only in the stubs
    """A fixed-point integer (value x 10**SCALE_DIGITS): an int in Python, exact in the database."""

    description = "Fixed-point integer (value x 10**SCALE_DIGITS)"
    empty_strings_allowed = False

    def db_type(self, connection: BaseDatabaseWrapper) -> str:
        if connection.vendor == "postgresql":
            return POSTGRES_TYPE
        return "bigint"

    def rel_db_type(self, connection: BaseDatabaseWrapper) -> str:
        return self.db_type(connection)

    def get_prep_value(self, value: Any) -> int | None:
        value = super().get_prep_value(value)
        return None if value is None else self.to_python(value)

    def get_db_prep_value(self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False) -> int | None:
        if not prepared:
            value = self.get_prep_value(value)
        if value is None:
            return None
        limit = max_abs_for(connection)
        if not -limit <= value <= limit:
            raise FixedPointRangeError(
                f"{self.model.__name__}.{self.name}: {fixed_to_str(value)[:48]} is outside the range "
                f"{connection.vendor} stores exactly (|value| <= {fixed_to_str(limit)})"
            )
        return value

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> int | None:
        # PostgreSQL returns numeric as Decimal (integral: the column has no scale).
        return None if value is None else int(value)

    def to_python(self, value: Any) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if isinstance(value, Decimal) and value == value.to_integral_value():
            return int(value)
        if isinstance(value, str) and value.lstrip("-").isdigit():
            return int(value)
        raise FixedPointError(f"{self.name}: not a fixed-point integer: {value!r}")

    def get_internal_type(self) -> str:
        return "FixedPointField"

    def formfield(self, **kwargs: Any) -> Any:
        from django import forms

        return super().formfield(**{"form_class": forms.IntegerField, **kwargs})


SQLITE_DECIMAL_DIGITS = 15


def stored_exactly(value: Decimal) -> None:
    """Validate that a DecimalField value survives this database unrounded.

    SQLite stores a decimal column as a REAL and reads back 15 significant digits; a
    longer value (an account's capital or a trade quantity with 12 places) would come
    back rounded, so there it is refused rather than saved.
    """
    from django.core.exceptions import ValidationError
    from django.db import connection

    digits = value.normalize().as_tuple().digits if value.is_finite() else ()
    if connection.vendor == "sqlite" and len(digits) > SQLITE_DECIMAL_DIGITS:
        raise ValidationError(
            f"{value} has {len(digits)} significant digits; SQLite keeps {SQLITE_DECIMAL_DIGITS} "
            "(use PostgreSQL for more)",
            code="sqlite_digits",
        )
