"""The admin site, by noun; importing the modules registers their admins."""

from reviewer.admin import applications, domains, policies, records, task_classifier

__all__ = ["applications", "domains", "policies", "records", "task_classifier"]
