"""Settings, all from the environment (12-factor) with safe local defaults.

Embedded default (nothing set): SQLite under var/, in-memory channel layer, periodic
jobs inside the site process. Scale-out: DATABASE_URL and REDIS_URL switch on
PostgreSQL, channels_redis and Celery. Restart to reload.

One module per topic; each reads its own variables, and those that need the shared
ones (env, BASE_DIR, VAR_DIR, DEBUG) take them from base. No setting is assigned in two
modules, so the order of the imports below decides nothing.
"""

from __future__ import annotations

from tradingsite.settings.alerts import *  # noqa: F403
from tradingsite.settings.api import *  # noqa: F403
from tradingsite.settings.base import *  # noqa: F403
from tradingsite.settings.channel_layers import *  # noqa: F403
from tradingsite.settings.dashboard import *  # noqa: F403
from tradingsite.settings.database import *  # noqa: F403
from tradingsite.settings.feeds import *  # noqa: F403
from tradingsite.settings.health import *  # noqa: F403
from tradingsite.settings.jobs import *  # noqa: F403
from tradingsite.settings.logs import *  # noqa: F403
from tradingsite.settings.metrics import *  # noqa: F403
from tradingsite.settings.orders import *  # noqa: F403
from tradingsite.settings.processor import *  # noqa: F403
from tradingsite.settings.recovery import *  # noqa: F403
from tradingsite.settings.runtime import *  # noqa: F403
from tradingsite.settings.security import *  # noqa: F403
from tradingsite.settings.static_files import *  # noqa: F403
