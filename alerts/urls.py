from django.urls import path

from alerts import views

app_name = "alerts"

urlpatterns = [
    path("", views.alerts_page, name="alerts"),
    path("channels/<int:pk>/", views.channel_edit, name="channel-edit"),
    path("channels/<int:pk>/delete/", views.channel_delete, name="channel-delete"),
    path("channels/<int:pk>/test/", views.channel_test, name="channel-test"),
]
