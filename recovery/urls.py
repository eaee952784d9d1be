from django.urls import path

from recovery import views

app_name = "recovery"

urlpatterns = [
    path("prompts.json", views.prompts_json, name="prompts-json"),
    path("prompts/<str:recovery_token>/", views.prompt_detail, name="prompt-detail"),
    path("prompts/<str:recovery_token>/code", views.submit_code, name="submit-code"),
    path("callback/<str:broker>", views.oauth_callback, name="oauth-callback"),
]
