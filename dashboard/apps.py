from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Dashboard and controls"

    def ready(self) -> None:
        from dashboard import checks  # noqa: F401  (registers the chart-asset check)
