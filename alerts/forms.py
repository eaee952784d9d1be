"""The notification-channel form: a name, an apprise URL (write-only) and the kinds wanted."""

from __future__ import annotations

from typing import Any

from django import forms

from alerts.channels import MAX_URL_LENGTH, ChannelUrlRefused, channel_url_check


class ChannelForm(forms.Form):
    name = forms.CharField(max_length=80, strip=True)
    # Never rendered back: the stored URL holds the channel's secret.
    url = forms.CharField(
        label="Notification URL",
        max_length=MAX_URL_LENGTH,
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off", "spellcheck": "false"}),
        help_text="json://host/path (webhook), tgram://bot-token/chat-id (Telegram), mailto://user:password@host (email)",
    )
    enabled = forms.BooleanField(required=False, initial=True)
    notify_fills = forms.BooleanField(label="Fills", required=False, initial=True)
    notify_kill_switches = forms.BooleanField(label="Kill switches", required=False, initial=True)
    notify_health = forms.BooleanField(label="Degraded health (staff)", required=False, initial=True)
    notify_broker_login = forms.BooleanField(label="Broker logins (Upstox daily)", required=False, initial=True)

    def __init__(self, *args: Any, url_required: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.url_required = url_required
        if not url_required:
            self.fields["url"].help_text = "Leave empty to keep the stored URL. " + str(self.fields["url"].help_text)

    def clean_url(self) -> str:
        url = str(self.cleaned_data.get("url") or "")
        if not url and not self.url_required:
            return ""
        try:
            channel_url_check(url)
        except ChannelUrlRefused as exc:
            raise forms.ValidationError(str(exc)) from None
        return url

    def kinds(self) -> dict[str, bool]:
        return {
            field: bool(self.cleaned_data[field])
            for field in ("notify_fills", "notify_kill_switches", "notify_health", "notify_broker_login")
        }
