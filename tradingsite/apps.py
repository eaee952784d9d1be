from django.apps import AppConfig


class TradingsiteConfig(AppConfig):
    name = "tradingsite"
    verbose_name = "Site health"
