from django.apps import AppConfig


class OrdersConfig(AppConfig):
    name = "orders"
    verbose_name = "Accounts and orders"

    def ready(self) -> None:
        # Each built-in broker module registers its kind (orders.brokers.kinds) on import.
        from orders.brokers import binance_usdm, paper, upstox  # noqa: F401
