"""Secrets, allowed hosts, and the HTTPS and cookie hardening that DEBUG=0 switches on."""

from __future__ import annotations

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
