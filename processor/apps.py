from django.apps import AppConfig


class ProcessorConfig(AppConfig):
    name = "processor"
    verbose_name = "Strategies"
