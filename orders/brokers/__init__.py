"""Brokers behind one interface (orders.brokers.base.Broker)."""
