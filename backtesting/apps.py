from django.apps import AppConfig


class BacktestingConfig(AppConfig):
    name = "backtesting"
    verbose_name = "Backtesting"
