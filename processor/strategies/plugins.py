"""Loading strategy kinds from outside the project: a setting, or package entry points.

Two ways for a user's package to add kinds without editing this project:

- `STRATEGY_MODULES` (the environment variable of the same name, comma-separated):
  modules imported at start-up; each registers its kinds with `@register_strategy`.
- An entry point in the `tradingsite.strategies` group of an installed package
  (`[project.entry-points."tradingsite.strategies"] mykinds = "mypackage.strategies"`):
  loaded the same way, with nothing to configure.

A module that cannot be imported stops the start with an error naming it: a site that
silently lost a strategy kind would stop trading it without a word.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib import import_module
from importlib.metadata import entry_points

from django.core.exceptions import ImproperlyConfigured

from processor.strategies.registry import STRATEGIES

ENTRY_POINT_GROUP = "tradingsite.strategies"
log = logging.getLogger(__name__)


def load_strategy_plugins(modules: Iterable[str]) -> list[str]:
    """Import every plug-in module and entry point; return the kinds they added."""
    before = set(STRATEGIES)
    for name in modules:
        try:
            import_module(name)
        except Exception as exc:
            raise ImproperlyConfigured(f"STRATEGY_MODULES: cannot import {name!r}: {exc}") from exc
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            point.load()
        except Exception as exc:
            raise ImproperlyConfigured(
                f"entry point {point.name!r} ({point.value}) of group {ENTRY_POINT_GROUP}: cannot load: {exc}"
            ) from exc
    added = sorted(set(STRATEGIES) - before)
    if added:
        log.info("strategy plug-ins: %s", ", ".join(added))
    return added
