"""The read-only JSON API (Django REST framework) and its OpenAPI schema."""

from __future__ import annotations

from tradingsite.settings.base import env

REST_FRAMEWORK = {
    # Token first: an unauthenticated call gets 401 with `WWW-Authenticate: Token`.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": env.int("API_PAGE_SIZE", default=100),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Decimals go out as strings: a JSON number would be read as a float by most clients.
    "COERCE_DECIMAL_TO_STRING": True,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "tradingsite API",
    "DESCRIPTION": "Read-only JSON API; every list is scoped to the caller's accounts.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}
