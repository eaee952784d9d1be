from django.apps import AppConfig
from django.conf import settings


class ProcessorConfig(AppConfig):
    name = "processor"
    verbose_name = "Strategies"

    def ready(self) -> None:
        # The built-in kinds register on import; plug-ins after them, so a plug-in that
        # reuses a built-in name is refused as registered twice.
        from processor.strategies.plugins import load_strategy_plugins

        load_strategy_plugins(settings.STRATEGY_MODULES)
