from django.apps import AppConfig


class TradingsiteConfig(AppConfig):
    """The composition root: loads the metric modules every process exports and names the expected feeds."""

    name = "tradingsite"
    verbose_name = "Site"

    def ready(self) -> None:
        from tradingsite.metrics import load_metric_modules

        # Every family /metrics promises is exported from the start, not once first used.
        load_metric_modules()

        from core.expected import register_expected_source
        from tradingsite.health_expected import enabled_feeds

        register_expected_source(enabled_feeds)

        from tradingsite import celery_health

        celery_health.install()

        from api import docs  # noqa: F401  (registers the API viewer's asset check)
