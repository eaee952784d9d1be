"""Streams: getting a venue's frames in, whole and in order.

One supervised stream per websocket endpoint (or per local frame source, for the
simulated and replay venues): connect and subscribe behind backoff and a circuit
breaker, recover the gap over REST, parse, check consistency, and hand FeedData to
the fan-out. Heartbeat, supervisor, scheduler and reconnect are the parts it is
composed of (`stream_composition`).
"""
