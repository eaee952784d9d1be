from django.urls import path

from backtesting import views

urlpatterns = [
    path("", views.run_list, name="backtest-runs"),
    path("new/", views.run_new, name="backtest-run-new"),
    path("compare/", views.run_compare, name="backtest-compare"),
    path("<int:pk>/", views.run_detail, name="backtest-run"),
    path("<int:pk>/state.json", views.run_state_json, name="backtest-run-state"),
]
