from django.apps import AppConfig


class RecoveryConfig(AppConfig):
    """Broker token state, auth prompts and datasource resume (issue #7 builds it out)."""

    name = "recovery"
    verbose_name = "Broker login recovery"
