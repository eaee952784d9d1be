"""Secrets, allowed hosts, the HTTPS and cookie hardening that DEBUG=0 switches on, login
throttling, the Content-Security-Policy."""

from __future__ import annotations

from datetime import timedelta

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from tradingsite.local_secrets import new_fernet_key, new_secret_key, read_or_create
from tradingsite.settings.base import DEBUG, VAR_DIR, env

if "SECRET_KEY" in env:
    SECRET_KEY = env.str("SECRET_KEY")
elif DEBUG:
    SECRET_KEY = read_or_create(VAR_DIR / "secret_key", new_secret_key)
else:
    raise ImproperlyConfigured("SECRET_KEY is required when DEBUG is off: set the SECRET_KEY environment variable.")

# MultiFernet keys for broker tokens, newest first. Kept apart from SECRET_KEY so that
# rotating one never makes the other's ciphertexts unreadable.
if "TOKEN_ENCRYPTION_KEY" in env:
    TOKEN_ENCRYPTION_KEYS = env.list("TOKEN_ENCRYPTION_KEY")
elif DEBUG:
    TOKEN_ENCRYPTION_KEYS = [read_or_create(VAR_DIR / "token_encryption_key", new_fernet_key)]
else:
    # Checked where a broker token is first encrypted, with a named error.
    TOKEN_ENCRYPTION_KEYS = []

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

if not DEBUG:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    # Probes and scrapers talk plain HTTP inside the cluster.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
    if env.bool("BEHIND_TLS_PROXY", default=False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

# Login throttling (django-axes) on every password login: the site's, the admin's, and
# any view that calls django.contrib.auth.authenticate with the request. After
# AXES_FAILURE_LIMIT wrong passwords for one username from one address, that pair is
# refused (HTTP 429, templates/registration/locked_out.html) for AXES_COOLOFF_MINUTES,
# even with the right password; `manage.py axes_reset` lifts a lockout at once.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out login before the password is checked
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("AXES_COOLOFF_MINUTES", default=15.0))
# Alternatives separated by commas, parameters locked together joined by "+":
# "username+ip_address" (default) locks one username from one address, so a guesser
# cannot lock the real user out from elsewhere; "username" locks the username everywhere.
AXES_LOCKOUT_PARAMETERS = [
    part.split("+") if "+" in part else part
    for part in env.list("AXES_LOCKOUT_PARAMETERS", default=["username+ip_address"])
]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
# The banner axes logs at every start (every manage.py command) says nothing an operator acts on.
AXES_VERBOSE = False
# The client address is the socket's peer unless a trusted proxy sets X-Forwarded-For:
# a forged header must not give every guess a fresh address.
if env.bool("BEHIND_TLS_PROXY", default=False):
    AXES_IPWARE_PROXY_COUNT = env.int("AXES_PROXY_COUNT", default=1)
    AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"]
else:
    AXES_IPWARE_META_PRECEDENCE_ORDER = ["REMOTE_ADDR"]

# Content-Security-Policy (django-csp) on every page: scripts, styles, images and
# connections from the site itself only (the chart library is a static file of the
# site), no inline script or style, no plugins, no framing, forms post only here.
# 'self' in connect-src covers the dashboard websocket on the same host and port.
# The one inline style allowed is the chart library's attribution-logo rule, a fixed
# string inside the library, by its hash: an upgrade that changes it shows up as a
# violation in the browser test (tests/e2e/test_csp_browser.py).
CHART_ATTRIBUTION_STYLE_HASH = "'sha256-3pRED1tOXas1FXFoPb9TGCjmYe9XQsmO9OV23khV2nY='"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, CHART_ATTRIBUTION_STYLE_HASH],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}
