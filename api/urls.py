"""/api/: read-only resources, the OpenAPI schema at /api/schema/.

The site's LoginRequiredMiddleware would redirect a token-authenticated request (it
runs before DRF authenticates), so every API view opts out of it and relies on DRF's
IsAuthenticated instead, which accepts a session or `Authorization: Token <key>`.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.urls import URLPattern, URLResolver, path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from api import backtests, views

app_name = "api"

router = DefaultRouter()
router.register("accounts", views.AccountViewSet, basename="account")
router.register("orders", views.OrderViewSet, basename="order")
router.register("fills", views.FillViewSet, basename="fill")
router.register("positions", views.PositionViewSet, basename="position")
router.register("signals", views.SignalViewSet, basename="signal")
router.register("strategies", views.StrategyViewSet, basename="strategy")
router.register("prompts", views.PromptViewSet, basename="prompt")
router.register("health", views.HealthViewSet, basename="health")
router.register("backtests", backtests.BacktestRunViewSet, basename="backtest")


def _token_friendly(patterns: list[URLPattern | URLResolver]) -> list[URLPattern | URLResolver]:
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            login_not_required(pattern.callback)
    return patterns


urlpatterns = _token_friendly(
    [
        path("schema/", SpectacularAPIView.as_view(), name="schema"),
        *router.urls,
    ]
)
