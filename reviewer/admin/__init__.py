"""The admin site, by noun; importing the modules registers their admins."""

from reviewer.admin import domains, policies, records

__all__ = ["domains", "policies", "records"]
