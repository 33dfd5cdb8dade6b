from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from reviewer.gateway import views as gateway_views

# Error answers: JSON under /api/, OpenAI's error shape under /v1/, the app's own translated
# pages elsewhere.
handler400 = "webapp.errors.bad_request"
handler403 = "webapp.errors.permission_denied"
handler404 = "webapp.errors.page_not_found"
handler500 = "webapp.errors.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("v1/", include("reviewer.gateway.urls")),
    # /v1 itself: an OpenAI-shaped 404 like any unknown /v1/ route, not a redirect page.
    path("v1", gateway_views.not_found),
    path("", include("reviewer.web.dashboard_urls")),
    path("", include("reviewer.web.urls")),
]
