from django.apps import AppConfig


class TradingsiteConfig(AppConfig):
    """The composition root: hands the platform (core) this site's jobs and metric modules."""

    name = "tradingsite"
    verbose_name = "Site"

    def ready(self) -> None:
        from core.schedule import install_periodic_jobs
        from tradingsite.metrics import load_metric_modules
        from tradingsite.schedule import PERIODIC_JOBS

        install_periodic_jobs(PERIODIC_JOBS)
        # Every family /metrics promises is exported from the start, not once first used.
        load_metric_modules()
