"""Routes of the Pause ROI dashboard and the Prometheus metrics page."""

from django.urls import path

from reviewer.analytics import dashboard, metrics

urlpatterns = [
    path("dashboard/", dashboard.dashboard, name="dashboard"),
    path("dashboard/sessions.csv", dashboard.sessions_csv, name="dashboard-csv"),
    path("metrics", metrics.metrics_view, name="metrics"),
]
