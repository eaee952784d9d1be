from django.apps import AppConfig


class FeedsConfig(AppConfig):
    name = "feeds"
    verbose_name = "Feeds"

    def ready(self) -> None:
        # Register the periodic jobs' Celery tasks in every process, not only in workers
        # that run autodiscovery (the beat schedule names them).
        from feeds import tasks  # noqa: F401
