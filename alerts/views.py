"""The alerts page (the user's channels and their alert history) and its forms."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from alerts import services
from alerts.channels import ChannelUrlRefused
from alerts.forms import ChannelForm
from alerts.models import NotificationChannel
from alerts.selectors import alerts_for_user, channels_for_user

HISTORY_PAGE = 50


def _user_id(request: HttpRequest) -> int:
    # LoginRequiredMiddleware admits only logged-in users to these views.
    return int(request.user.pk or 0)


def _page(request: HttpRequest, form: ChannelForm, status: int = 200) -> HttpResponse:
    history = Paginator(alerts_for_user(request.user), HISTORY_PAGE).get_page(request.GET.get("page"))
    context = {"channels": channels_for_user(request.user), "form": form, "history": history}
    return render(request, "alerts/alerts.html", context, status=status)


@require_http_methods(["GET", "POST"])
def alerts_page(request: HttpRequest) -> HttpResponse:
    """GET: channels, a form for a new one, the alert history. POST: add the channel."""
    if request.method == "GET":
        return _page(request, ChannelForm())
    form = ChannelForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    data = form.cleaned_data
    try:
        services.channel_create(
            owner_id=_user_id(request), name=data["name"], url=data["url"], enabled=data["enabled"], **form.kinds()
        )
    except IntegrityError:
        form.add_error("name", "you already have a channel with this name")
        return _page(request, form, status=400)
    except ChannelUrlRefused as exc:
        form.add_error("url", str(exc))
        return _page(request, form, status=400)
    messages.success(request, f"channel {data['name']} added")
    return redirect("alerts:alerts")


def _own_channel(request: HttpRequest, pk: int) -> NotificationChannel:
    # Another user's channel is a 404, the same answer as a missing one.
    return get_object_or_404(channels_for_user(request.user), pk=pk)


@require_http_methods(["GET", "POST"])
def channel_edit(request: HttpRequest, pk: int) -> HttpResponse:
    channel = _own_channel(request, pk)
    if request.method == "GET":
        initial = {field: getattr(channel, field) for field in ("name", "enabled", *services.KIND_FIELDS)}
        form = ChannelForm(initial=initial, url_required=False)
        return render(request, "alerts/channel_edit.html", {"channel": channel, "form": form})
    form = ChannelForm(request.POST, url_required=False)
    if not form.is_valid():
        return render(request, "alerts/channel_edit.html", {"channel": channel, "form": form}, status=400)
    data = form.cleaned_data
    try:
        services.channel_update(
            channel=channel, name=data["name"], url=data["url"], enabled=data["enabled"], **form.kinds()
        )
    except IntegrityError:
        form.add_error("name", "you already have a channel with this name")
        return render(request, "alerts/channel_edit.html", {"channel": channel, "form": form}, status=400)
    messages.success(request, f"channel {data['name']} saved")
    return redirect("alerts:alerts")


@require_POST
def channel_delete(request: HttpRequest, pk: int) -> HttpResponse:
    channel = _own_channel(request, pk)
    channel.delete()
    messages.success(request, f"channel {channel.name} deleted")
    return redirect("alerts:alerts")


@require_POST
def channel_test(request: HttpRequest, pk: int) -> HttpResponse:
    channel = _own_channel(request, pk)
    services.channel_send_test(channel=channel)
    messages.success(request, f"test message queued for {channel.name}: see its delivery below")
    return redirect("alerts:alerts")
