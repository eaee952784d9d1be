"""The stack's objects, created in its own database (run in a subprocess with the stack's env).

The demo (feed `sim`, five instruments, `ema-cross` and `sol-volume-breakout` trading a
paper account, staff user `demo`), with the EMA on three-second buckets so that signals,
and the paper orders they place, come within seconds; and a login session for `demo`.
"""

from __future__ import annotations

import json
import os

from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore

from feeds.models import Feed
from processor.models import Strategy
from tradingsite.demo import DEMO_FEED, demo_load

FAST_EMA = {"timeframe_s": 3, "fast": 2, "slow": 4, "long_only": False}
TICK_INTERVAL_MS = int(os.environ.get("STACK_TICK_INTERVAL_MS", "100"))


def main() -> None:
    demo_load(password=os.environ["STACK_PASSWORD"])
    Strategy.objects.filter(name="ema-cross").update(params=FAST_EMA)
    feed = Feed.objects.get(name=DEMO_FEED)
    feed.settings = {**feed.settings, "interval_ms": TICK_INTERVAL_MS}
    feed.save(update_fields=["settings"])
    user = get_user_model().objects.get(username="demo")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    print(json.dumps({"session_key": session.session_key, "user": user.pk}))
