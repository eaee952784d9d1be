from django.apps import AppConfig


class TradingsiteConfig(AppConfig):
    """The composition root: loads the metric modules every process exports."""

    name = "tradingsite"
    verbose_name = "Site"

    def ready(self) -> None:
        from tradingsite.metrics import load_metric_modules

        # Every family /metrics promises is exported from the start, not once first used.
        load_metric_modules()
