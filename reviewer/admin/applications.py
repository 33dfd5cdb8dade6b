"""The admin of applications: the programs that call the review gateway with a key of their own.
A key is made by reviewer.lifecycle.application_keys and shown once, in a message on the next
page; only its digest is kept. Creating, changing, rotating and revoking are audited."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from reviewer.lifecycle import application_keys
from reviewer.models import Application

LIMITS = ["max_concurrent", "requests_per_minute"]


@admin.register(Application)
class ApplicationAdmin(admin.ModelAdmin[Application]):
    list_display = ["name", "key_prefix", "domain_list", "active", *LIMITS, "created_at"]
    list_filter = ["domains"]
    search_fields = ["name", "key_prefix"]
    filter_horizontal = ["domains"]
    fields = ["name", "domains", *LIMITS, "key_prefix", "created_at", "rotated_at", "revoked_at"]
    readonly_fields = ["key_prefix", "created_at", "rotated_at", "revoked_at"]
    actions = ["rotate_keys", "revoke"]

    @admin.display(description=_("domains"))
    def domain_list(self, obj: Application) -> str:
        return ", ".join(domain.slug for domain in obj.domains.all())

    @admin.display(description=_("active"), boolean=True)
    def active(self, obj: Application) -> bool:
        return not obj.is_revoked

    def get_queryset(self, request: HttpRequest) -> QuerySet[Application]:
        return super().get_queryset(request).prefetch_related("domains")

    def has_delete_permission(self, request: HttpRequest, obj: Application | None = None) -> bool:
        return False  # revoke instead: its generations and the audit chain name it

    def save_model(self, request: HttpRequest, obj: Application, form: Any, change: bool) -> None:
        if change:
            form.settings_before = application_keys.settings_of(Application.objects.get(pk=obj.pk))
            super().save_model(request, obj, form, change)
            return
        data = form.cleaned_data
        app, key = application_keys.create(
            data["name"],
            data["domains"],
            request.user.get_username(),
            **{limit: data[limit] for limit in LIMITS},
        )
        obj.pk, obj.key_digest, obj.key_prefix = app.pk, app.key_digest, app.key_prefix
        obj.created_at = app.created_at
        self.show_key(request, app, key)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        if not change:
            super().save_related(request, form, formsets, change)
            return
        super().save_related(request, form, formsets, change)
        actor = request.user.get_username()
        application_keys.record_change(form.instance, form.settings_before, actor)

    # Actions ask for the change permission: by default Django lets anyone who may view the list
    # run them, and a new key hands over the application's identity.
    @admin.action(
        description=_("Rotate the keys of the selected applications (shows them once)"),
        permissions=["change"],
    )
    def rotate_keys(self, request: HttpRequest, queryset: QuerySet[Application]) -> None:
        for app in queryset:
            was_revoked = app.revoked_at is not None
            self.show_key(request, app, application_keys.rotate(app, request.user.get_username()))
            if was_revoked:  # a new key makes it active again: said, never done silently
                message = _("%(name)s was revoked; with its new key it is active again")
                self.message_user(request, message % {"name": app.name}, messages.WARNING)

    @admin.action(description=_("Revoke the selected applications' keys"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[Application]) -> None:
        revoked = 0
        for app in queryset.filter(revoked_at__isnull=True):
            application_keys.revoke(app, request.user.get_username())
            revoked += 1
        self.message_user(request, _("Revoked: %(count)d.") % {"count": revoked})

    def show_key(self, request: HttpRequest, app: Application, key: str) -> None:
        message = _("Key of %(name)s: %(key)s (copy it now; it is not shown again)")
        self.message_user(request, message % {"name": app.name, "key": key}, messages.WARNING)
