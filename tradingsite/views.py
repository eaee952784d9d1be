"""Health endpoints and the guarded metrics endpoint (the dashboard page is dashboard.views)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from core.health_report import build_report
from core.probes import healthz_response, readiness_response
from core.readiness import database_reachable
from core.selectors import component_health_effective
from tradingsite.metric_peers import health_families
from tradingsite.site_figures import site_figures_field
from tradingsite.web_metrics import web_metrics_registry


@login_not_required
@require_GET
@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    # Normally answered by core.probes.ProbeMiddleware before the session middleware.
    return healthz_response()


@login_not_required
@require_GET
@never_cache
def readyz(request: HttpRequest) -> HttpResponse:
    """This process's readiness (core.probes, normally answered by its middleware)."""
    return readiness_response(request)


@staff_member_required
@require_GET
@never_cache
def internal_health(request: HttpRequest) -> JsonResponse:
    """Every process, feed and job (expected ones nobody reports included) plus the loop fields."""
    db_ok, db_reason = database_reachable()
    components = component_health_effective() if db_ok else []
    families, peers = health_families()  # this process's counters plus METRICS_PEERS' (None: its own only)
    report = build_report(database_ok=db_ok, database_reason=db_reason, components=components, families=families)
    return JsonResponse(report | {"siteFigures": site_figures_field(database_ok=db_ok, metric_peers=peers)})


@login_not_required
@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus metrics for a staff session or `Authorization: Bearer $METRICS_TOKEN`."""
    header = request.headers.get("Authorization", "")
    token_ok = bool(settings.METRICS_TOKEN) and hmac.compare_digest(
        header.encode(), f"Bearer {settings.METRICS_TOKEN}".encode()
    )
    if not (token_ok or (request.user.is_authenticated and request.user.is_staff)):
        return HttpResponse("metrics need a staff login or the metrics bearer token\n", status=403)
    return HttpResponse(generate_latest(web_metrics_registry()), content_type=CONTENT_TYPE_LATEST)


@login_not_required
@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """The site icon (static/favicon.svg) for browsers that ask /favicon.ico."""
    return redirect(static("favicon.svg"), permanent=True)
