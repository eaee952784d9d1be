"""/api/: read-only resources, the OpenAPI schema at /api/schema/, its viewer at /api/docs/.

The site's LoginRequiredMiddleware would redirect a token-authenticated request (it
runs before DRF authenticates), so every API view opts out of it and relies on DRF's
IsAuthenticated instead, which accepts a session or `Authorization: Token <key>`.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import DefaultRouter

from api import backtests, docs, manual, order_books, sweeps, trade_views, views

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
router.register("trades", trade_views.TradeViewSet, basename="trade")
router.register("performance", trade_views.PerformanceViewSet, basename="performance")
router.register("backtests", backtests.BacktestRunViewSet, basename="backtest")
router.register("backtest-sweeps", sweeps.BacktestSweepViewSet, basename="backtest-sweep")


def _token_friendly(patterns: list[URLPattern | URLResolver]) -> list[URLPattern | URLResolver]:
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            login_not_required(pattern.callback)
    return patterns


urlpatterns = [
    *_token_friendly(
        [
            path("schema/", docs.SchemaView.as_view(), name="schema"),
            path("order-books/<int:pk>/", order_books.OrderBookView.as_view(), name="order-book"),
            path("manual/positions/<int:pk>/close/", manual.PositionCloseView.as_view(), name="manual-position-close"),
            path("manual/orders/<int:pk>/cancel/", manual.OrderCancelView.as_view(), name="manual-order-cancel"),
            path(
                "manual/accounts/<int:pk>/flatten/", manual.AccountFlattenView.as_view(), name="manual-account-flatten"
            ),
            path("manual/entries/", manual.ManualEntryView.as_view(), name="manual-entry"),
            *router.urls,
        ]
    ),
    # A page for people: an anonymous visitor is sent to the site's login, not given the API's
    # 401 (DRF marks its views exempt from LoginRequiredMiddleware, so the decorator says it).
    path("docs/", login_required(docs.SchemaDocsView.as_view()), name="docs"),
]
