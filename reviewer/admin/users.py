"""Users in the admin, audited as the settings are: who made whom staff or inactive, gave
which permissions or groups, set a password or deleted an account. An account decides who
reviews what and who may change the policies, so its changes belong in the same chain. The
password's hash never goes into it; a password change is recorded as one."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest, HttpResponse

from reviewer.admin.audited import AuditedChanges, record, values

SECRET = ("password",)
# What the admin's forms change, beside the columns: which groups and permissions a user has.
LINKS = ("groups", "user_permissions")


def links(user: User) -> dict[str, list[str]]:
    return {
        "groups": sorted(user.groups.values_list("name", flat=True)),
        "user_permissions": sorted(
            f"{app}.{codename}"
            for app, codename in user.user_permissions.values_list(
                "content_type__app_label", "codename"
            )
        ),
    }


class AuditedUserAdmin(AuditedChanges[User], UserAdmin[User]):
    # A login is not an admin's change; the form's date widget drops the join time's
    # microseconds, so every save would seem to change it.
    audit_skip = (*SECRET, "last_login", "date_joined")

    def deleted_fields(self, obj: User) -> dict[str, Any]:
        return {**values(obj, SECRET), **links(obj)}

    def deleted_with(self, obj: User) -> dict[str, Any]:
        """The domains they reviewed, their API token, the claims they held (each goes back
        to its queue)."""
        went: dict[str, Any] = {}
        domains = sorted(obj.review_domains.values_list("slug", flat=True))
        if domains:
            went["review_domains"] = domains
        if hasattr(obj, "api_token"):
            went["api_token"] = True
        # Held now: an ended session keeps its claimant as its reviewer, and goes to no queue.
        held = obj.claimed_sessions.filter(claim_expires_at__isnull=False)
        claims = sorted(held.values_list("pk", flat=True))
        if claims:
            went["claims"] = claims
        return went

    def save_model(self, request: HttpRequest, obj: User, form: Any, change: bool) -> None:
        stored = User.objects.filter(pk=obj.pk).first() if change and obj.pk else None
        form.links_before = links(stored) if stored is not None else None
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        before = getattr(form, "links_before", None)
        if before is None:  # a new user: its record was written with the row
            return
        after = links(form.instance)
        moved = {name: [before[name], after[name]] for name in LINKS if before[name] != after[name]}
        if moved:
            record(request, form.instance, "changed", moved)

    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        with transaction.atomic():  # the record stands or falls with the new password
            user = self.get_object(request, unquote(id))
            before = user.password if user is not None else None
            answer = super().user_change_password(request, id, form_url)
            if user is not None:
                user.refresh_from_db(fields=["password"])
                if user.password != before:
                    fields = {"usable_password": user.has_usable_password()}
                    record(request, user, "password_changed", fields)
        return answer


admin.site.unregister(User)
admin.site.register(User, AuditedUserAdmin)
