from django.urls import path

from preferences import views

app_name = "preferences"

urlpatterns = [
    path("time-zone/", views.time_zone_page, name="time-zone"),
]
