from django.urls import path

from dashboard import views

urlpatterns = [
    path("", views.dashboard_page, name="dashboard"),
    path("dashboard/panels/<slug:name>/", views.panel, name="dashboard-panel"),
    path("controls/strategies/<int:pk>/", views.strategy_toggle, name="control-strategy"),
    path("controls/trade-settings/<int:pk>/", views.trade_setting_toggle, name="control-trade-setting"),
    path("controls/kill-switch/<str:scope>/", views.kill_switch_toggle, name="control-kill-switch"),
]
