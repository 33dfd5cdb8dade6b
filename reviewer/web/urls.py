from django.urls import path, re_path

from reviewer.web import api, audit_pages, queue, views
from reviewer.web.command_table import COMMANDS

api_commands = [
    path(f"api/sessions/<int:session_id>/{name}", api.command_view(name), name=f"api-{name}")
    for name in COMMANDS
]

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("", views.session_list, name="session-list"),
    path("sessions/new", views.session_new, name="session-new"),
    path("sessions/next", views.next_case, name="session-next"),
    path("queue/items/<int:session_id>", queue.queue_item, name="queue-item"),
    path("sessions/<int:session_id>/", views.session_page, name="session-page"),
    path("sessions/<int:session_id>/audit", views.session_audit, name="session-audit"),
    path("sessions/<int:session_id>/audit/graphs", audit_pages.audit_graphs, name="audit-graphs"),
    path(
        "sessions/<int:session_id>/audit/graphs.json",
        audit_pages.audit_graphs_json,
        name="audit-graphs-json",
    ),
    path(
        "sessions/<int:session_id>/audit/graphs.prov.json",
        audit_pages.audit_graphs_prov,
        name="audit-graphs-prov",
    ),
    path("vendor/plotly.min.js", views.plotly_js, name="plotly-js"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("api/sessions", api.sessions, name="api-sessions"),
    path("api/sessions/<int:session_id>", api.session, name="api-session"),
    path("api/sessions/<int:session_id>/events", api.session_events, name="api-events"),
    path("api/sessions/<int:session_id>/redline", api.session_redline, name="api-redline"),
    *api_commands,
    path("api/token", api.token, name="api-token"),
    path("api/schema", api.schema, name="api-schema"),
    re_path(r"^api(/|$)", api.not_found),  # /api itself too: JSON, not a redirect page
]
