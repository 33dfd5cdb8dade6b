"""The gateway's routes, included under /v1/ by webapp/urls.py."""

from django.urls import path, re_path

from reviewer.gateway import views

urlpatterns = [
    path("models", views.models, name="v1-models"),
    path("models/<str:model_id>", views.model, name="v1-model"),
    path("chat/completions", views.chat_completions, name="v1-chat-completions"),
    path("completions", views.completions, name="v1-completions"),
    path("responses", views.create_response, name="v1-responses"),
    path("responses/<str:response_id>", views.response, name="v1-response"),
    path("responses/<str:response_id>/cancel", views.cancel_response, name="v1-response-cancel"),
    re_path(r"^(?P<rest>.*)$", views.not_found),
]
