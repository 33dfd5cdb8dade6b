"""The admin site, by noun; importing the modules registers their admins."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from reviewer.admin import (
    applications,
    domains,
    login_records,
    policies,
    records,
    roi,
    task_classifier,
    users,
)

__all__ = [
    "applications",
    "domains",
    "login_records",
    "policies",
    "records",
    "roi",
    "task_classifier",
    "users",
]

# The admin says whose it is: Django's default header reads "Django administration".
admin.site.site_header = _("Caesura administration")
admin.site.site_title = _("Caesura admin")
