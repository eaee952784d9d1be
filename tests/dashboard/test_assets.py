"""The chart library comes from npm; a missing file is a named system-check error."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles import finders

from dashboard.checks import CHART_SCRIPT, chart_asset_missing, check_chart_asset


def test_the_installed_chart_script_is_served_by_staticfiles() -> None:
    assert chart_asset_missing(Path(settings.CHART_ASSET_DIR)) is None
    assert finders.find(f"vendor/lightweight-charts/{CHART_SCRIPT}")


def test_a_missing_chart_script_fails_the_system_check(settings, tmp_path: Path) -> None:
    settings.CHART_ASSET_DIR = tmp_path
    (error,) = check_chart_asset()
    assert error.id == "dashboard.E001"
    assert "npm ci" in error.msg
