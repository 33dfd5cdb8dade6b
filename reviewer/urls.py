from django.urls import path

from reviewer import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("", views.session_list, name="session-list"),
]
