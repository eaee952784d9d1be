"""Fast constructors for the frozen event dataclasses, for the parse hot path.

A frozen dataclass's `__init__` assigns each field through `object.__setattr__`,
looked up per field: with nine fields that is most of the cost of parsing a trade.
`fast_constructor(cls)` builds, once, a function with the same parameters (in field
order, with the same defaults) that sets the slots through their member descriptors.
The result is an ordinary, equal, immutable instance: the frozen check only guards
`setattr` after construction, which stays in force.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def fast_constructor(cls: type[T]) -> Callable[..., T]:
    """Return a constructor equivalent to `cls(...)` for a slotted, frozen dataclass."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if not hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__} is not a slotted dataclass")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    parameters, body = [], []
    for number, field in enumerate(fields):
        if field.default_factory is not _MISSING:
            raise TypeError(f"{cls.__name__}.{field.name} has a default factory")
        namespace[f"_set{number}"] = getattr(cls, field.name).__set__
        if field.default is _MISSING:
            parameters.append(field.name)
        else:
            namespace[f"_default{number}"] = field.default
            parameters.append(f"{field.name}=_default{number}")
        body.append(f"    _set{number}(self, {field.name})")
    source = f"def make({', '.join(parameters)}):\n    self = _new(_cls)\n" + "\n".join(body) + "\n    return self\n"
    exec(source, namespace)
    make: Callable[..., T] = namespace["make"]
    make.__doc__ = f"Return {cls.__name__}(...) built without the per-field frozen setattr."
    return make


def _event_constructors() -> tuple[Callable[..., Any], ...]:
    from feeds.market import BookTicker, FundingRate, MarketData, MarkPrice, Ticker

    return tuple(fast_constructor(cls) for cls in (MarketData, MarkPrice, FundingRate, Ticker, BookTicker))


# Same parameters as MarketData(...), MarkPrice(...), FundingRate(...), Ticker(...), BookTicker(...).
make_trade, make_mark_price, make_funding_rate, make_ticker, make_book_ticker = _event_constructors()
