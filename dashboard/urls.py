from django.urls import path

from dashboard import chart_history, depth, manual_views, trade_pages, unresolved, views

urlpatterns = [
    path("", views.dashboard_page, name="dashboard"),
    path("dashboard/panels/<slug:name>/", views.panel, name="dashboard-panel"),
    path("markets/depth/", depth.depth_index, name="depth-index"),
    path("markets/<int:pk>/depth/", depth.depth_page, name="depth"),
    path("dashboard/charts/<int:instrument_id>/history/", chart_history.chart_history, name="chart-history"),
    path("trades/", trade_pages.trades_page, name="trades"),
    path("trades/export.csv", trade_pages.trades_csv, name="trades-csv"),
    path("performance/", trade_pages.performance_page, name="performance"),
    path("controls/strategies/<int:pk>/", views.strategy_toggle, name="control-strategy"),
    path("controls/trade-settings/<int:pk>/", views.trade_setting_toggle, name="control-trade-setting"),
    path("controls/kill-switch/<str:scope>/", views.kill_switch_toggle, name="control-kill-switch"),
    path("controls/intents/<str:client_order_id>/release/", unresolved.intent_release, name="control-intent-release"),
    path("controls/intents/<str:client_order_id>/wait/", unresolved.intent_keep_waiting, name="control-intent-wait"),
    path("controls/positions/<int:pk>/close/", manual_views.position_close, name="control-position-close"),
    path("controls/orders/<int:pk>/cancel/", manual_views.order_cancel, name="control-order-cancel"),
    path("controls/accounts/<int:pk>/flatten/", manual_views.account_flatten, name="control-account-flatten"),
    path("controls/entries/", manual_views.entry, name="control-manual-entry"),
]
