"""The read-only JSON API (Django REST framework) and its OpenAPI schema."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from tradingsite.settings.base import env

API_PAGE_SIZE = env.int("API_PAGE_SIZE", default=100)
# The most rows one page may ask for (?limit=); a larger limit is a 400, not a slow query.
API_MAX_PAGE_SIZE = env.int("API_MAX_PAGE_SIZE", default=1000)
if not 1 <= API_PAGE_SIZE <= API_MAX_PAGE_SIZE:
    raise ImproperlyConfigured("API_PAGE_SIZE must be between 1 and API_MAX_PAGE_SIZE")

REST_FRAMEWORK = {
    # Token first: an unauthenticated call gets 401 with `WWW-Authenticate: Token`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON only: DRF's browsable HTML pages need inline scripts and styles, which the
    # Content-Security-Policy refuses; /api/schema/ documents every resource instead.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": API_PAGE_SIZE,
    # Typed filters (api.filters): a value a column cannot hold is a 400 naming the parameter.
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Decimals go out as strings: a JSON number would be read as a float by most clients.
    "COERCE_DECIMAL_TO_STRING": True,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "tradingsite API",
    "DESCRIPTION": "JSON API; every list is scoped to the caller's accounts.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema names every resource and filter: served to logged-in callers only, like the API.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Several models have a `status`; each choice set gets a name of its own in the schema.
    "ENUM_NAME_OVERRIDES": {"BacktestRunStatusEnum": "backtesting.models.RunStatus"},
}
