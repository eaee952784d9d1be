"""Broker logins: the Upstox OAuth app, provisioned token files, auth-code rate limits."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from tradingsite.settings.base import VAR_DIR, env

# Upstox OAuth app (https://account.upstox.com/developer/apps); no client id = no Upstox login.
UPSTOX_CLIENT_ID = env.str("UPSTOX_CLIENT_ID", default="")
UPSTOX_CLIENT_SECRET = env.str("UPSTOX_CLIENT_SECRET", default="")
if UPSTOX_CLIENT_ID and not UPSTOX_CLIENT_SECRET:
    raise ImproperlyConfigured("UPSTOX_CLIENT_ID is set but UPSTOX_CLIENT_SECRET is not: set both or neither.")
# Must equal the redirect URI registered with the app; it points at recovery's callback view.
UPSTOX_REDIRECT_URI = env.str("UPSTOX_REDIRECT_URI", default="http://127.0.0.1:8000/recovery/callback/upstox")
# Overridable so tests (and a staging fake) can point the exchange at a local server.
UPSTOX_AUTHORIZE_URL = env.str("UPSTOX_AUTHORIZE_URL", default="https://api.upstox.com/v2/login/authorization/dialog")
UPSTOX_TOKEN_URL = env.str("UPSTOX_TOKEN_URL", default="https://api.upstox.com/v2/login/authorization/token")
UPSTOX_TOKEN_TIMEOUT_S = env.float("UPSTOX_TOKEN_TIMEOUT_S", default=10.0)
# Provisioned tokens: "<broker>/<analytics|sandbox>" entries, read from
# <dir>/<broker>-<kind>.json (a mounted Secret in a cluster).
RECOVERY_PROVISIONED_TOKENS = env.list("RECOVERY_PROVISIONED_TOKENS", default=[])
RECOVERY_PROVISIONED_TOKEN_DIR = env.str("RECOVERY_PROVISIONED_TOKEN_DIR", default=str(VAR_DIR / "provisioned-tokens"))
RECOVERY_PROVISIONED_POLL_S = env.float("RECOVERY_PROVISIONED_POLL_S", default=30.0)
# How often runtime processes re-read OAuth token state written by the web process.
RECOVERY_TOKEN_STATE_POLL_S = env.float("RECOVERY_TOKEN_STATE_POLL_S", default=1.0)
# Auth-code submissions (form and OAuth redirect) per user per window; beyond it: HTTP 429.
RECOVERY_CODE_RATE_LIMIT = env.int("RECOVERY_CODE_RATE_LIMIT", default=5)
RECOVERY_CODE_RATE_WINDOW_S = env.int("RECOVERY_CODE_RATE_WINDOW_S", default=300)
