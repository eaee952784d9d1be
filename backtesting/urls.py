from django.urls import path

from backtesting import sweep_views, views

urlpatterns = [
    path("", views.run_list, name="backtest-runs"),
    path("new/", views.run_new, name="backtest-run-new"),
    path("compare/", views.run_compare, name="backtest-compare"),
    path("<int:pk>/", views.run_detail, name="backtest-run"),
    path("<int:pk>/state.json", views.run_state_json, name="backtest-run-state"),
    path("sweeps/new/", sweep_views.sweep_new, name="backtest-sweep-new"),
    path("sweeps/<int:pk>/", sweep_views.sweep_detail, name="backtest-sweep"),
    path("sweeps/<int:pk>/state.json", sweep_views.sweep_state_json, name="backtest-sweep-state"),
]
