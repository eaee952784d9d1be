"""Static files: the site's own, the chart library from npm, served by whitenoise."""

from __future__ import annotations

from pathlib import Path

from tradingsite.settings.base import BASE_DIR, DEBUG, VAR_DIR, env

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
# Chart library from npm (`npm ci`, see package.json); dashboard.checks fails loudly when
# the file is missing instead of serving a page whose charts silently never draw.
CHART_ASSET_DIR = Path(
    env.str("CHART_ASSET_DIR", default=str(BASE_DIR / "node_modules" / "lightweight-charts" / "dist"))
)
# The API viewer (Swagger UI) from npm as well; api.docs checks it the same way.
SWAGGER_UI_ASSET_DIR = Path(env.str("SWAGGER_UI_ASSET_DIR", default=str(BASE_DIR / "node_modules" / "swagger-ui-dist")))
STATICFILES_DIRS: list[Path | tuple[str, Path]] = [
    BASE_DIR / "static",
    ("vendor/lightweight-charts", CHART_ASSET_DIR),
    ("vendor/swagger-ui", SWAGGER_UI_ASSET_DIR),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG
if DEBUG:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request otherwise
