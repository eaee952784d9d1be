"""Fail loudly when the chart library was not installed (`npm ci`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

CHART_SCRIPT = "lightweight-charts.standalone.production.js"


def chart_asset_missing(asset_dir: Path) -> str | None:
    """Return why the chart script cannot be served from `asset_dir`, or None when it can."""
    script = asset_dir / CHART_SCRIPT
    if script.is_file() and script.stat().st_size > 0:
        return None
    return f"{script} is missing: run `npm ci` (or `make install`) in the project directory"


@register("staticfiles")
def check_chart_asset(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    problem = chart_asset_missing(Path(settings.CHART_ASSET_DIR))
    if problem is None:
        return []
    return [
        Error(
            problem, hint="package.json pins lightweight-charts; node_modules/ is not committed.", id="dashboard.E001"
        )
    ]
