"""The user's settings page: the time zone every time is shown in."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from preferences.forms import TimeZoneForm
from preferences.middleware import time_zone_remember
from preferences.models import UserPreference
from preferences.time_format import user_time_zone_name


@require_http_methods(["GET", "POST"])
def time_zone_page(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        form = TimeZoneForm(initial={"time_zone": user_time_zone_name(request.user.pk)})
        return render(request, "preferences/time_zone.html", {"form": form})
    form = TimeZoneForm(request.POST)
    if not form.is_valid():
        return render(request, "preferences/time_zone.html", {"form": form}, status=400)
    UserPreference.objects.update_or_create(
        user_id=int(request.user.pk or 0), defaults={"time_zone": form.cleaned_data["time_zone"]}
    )
    time_zone_remember(request, form.cleaned_data["time_zone"])
    messages.success(request, f"times are now shown in {form.cleaned_data['time_zone']}")
    return redirect("preferences:time-zone")
