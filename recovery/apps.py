from django.apps import AppConfig


class RecoveryConfig(AppConfig):
    """Broker token state, auth prompts and datasource resume."""

    name = "recovery"
    verbose_name = "Broker login recovery"

    def ready(self) -> None:
        # Register the periodic job's Celery task in every process, not only in workers
        # that run autodiscovery (the beat schedule names it).
        from recovery import tasks  # noqa: F401
