from __future__ import annotations

from django import forms

from preferences.models import time_zone_choices


class TimeZoneForm(forms.Form):
    time_zone = forms.ChoiceField(choices=time_zone_choices, help_text="Every time on the site is shown in this zone.")
