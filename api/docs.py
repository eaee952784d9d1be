"""The API's schema and its viewer (Swagger UI), both for logged-in users only.

The schema answers as JSON by default (a browser shows it instead of downloading a
file), YAML with `?format=yaml` as plain text; `Accept: application/vnd.oai.openapi`
still gets the standard YAML. The viewer's assets are static files of the site (npm
`swagger-ui-dist`, see package.json), its start script a same-origin URL: nothing from
a CDN and nothing inline, so the Content-Security-Policy stands as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.templatetags.static import static
from drf_spectacular.renderers import (
    OpenApiJsonRenderer,
    OpenApiJsonRenderer2,
    OpenApiYamlRenderer,
    OpenApiYamlRenderer2,
)
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.request import Request
from rest_framework.response import Response

SWAGGER_UI_FILES = ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js")


class PlainTextYamlRenderer(OpenApiYamlRenderer):
    """YAML as text/plain: a browser shows it."""

    media_type = "text/plain"


class SchemaView(SpectacularAPIView):
    renderer_classes = [
        OpenApiJsonRenderer2,  # application/json first: what a browser's */* gets
        OpenApiJsonRenderer,
        PlainTextYamlRenderer,
        OpenApiYamlRenderer,
        OpenApiYamlRenderer2,
    ]

    def _get_schema_response(self, request: Request) -> Response:
        response: Response = super()._get_schema_response(request)  # type: ignore[no-untyped-call]
        # drf-spectacular names a file; without the header nothing suggests saving one.
        del response.headers["Content-Disposition"]
        return response


class SchemaDocsView(SpectacularSwaggerSplitView):
    url_name = "api:schema"
    template_name = "api/swagger_ui.html"
    title = "tradingsite API"

    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        return static(f"vendor/swagger-ui/{filename}")

    @staticmethod
    def _swagger_ui_favicon() -> str:
        return static("favicon.svg")


def swagger_ui_missing(asset_dir: Path) -> str | None:
    """Return why the viewer's files cannot be served from `asset_dir`, or None when they can."""
    for name in SWAGGER_UI_FILES:
        if not (asset_dir / name).is_file():
            return f"{asset_dir / name} is missing: run `npm ci` (or `make install`) in the project directory"
    return None


@register("staticfiles")
def check_swagger_ui_asset(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    problem = swagger_ui_missing(Path(settings.SWAGGER_UI_ASSET_DIR))
    if problem is None:
        return []
    return [Error(problem, hint="package.json pins swagger-ui-dist; node_modules/ is not committed.", id="api.E001")]
