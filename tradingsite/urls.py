from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from tradingsite import views
from tradingsite.login_forms import SiteAdminAuthenticationForm, SiteAuthenticationForm

# The admin login refuses an over-long username as a form error too.
admin.site.login_form = SiteAdminAuthenticationForm

urlpatterns = [
    # The dashboard page, its panels and controls; views.dashboard stays for reference.
    path("", include("dashboard.urls")),
    path("login/", auth_views.LoginView.as_view(authentication_form=SiteAuthenticationForm), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Browsers ask for /favicon.ico on pages that name no icon (and before login).
    path("favicon.ico", views.favicon, name="favicon"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("internal/health", views.internal_health, name="internal-health"),
    path("metrics", views.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("recovery/", include("recovery.urls")),
    path("api/", include("api.urls")),
    path("alerts/", include("alerts.urls")),
    path("settings/", include("preferences.urls")),
    path("backtests/", include("backtesting.urls")),
]
