"""The task classifier in the admin: reviewers' corrections (read-only) and the retrained
versions, enabled or disabled by an action that refuses a version below the target and
audits what it changes."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from reviewer.admin.records import ReadOnlyAdmin
from reviewer.analytics import task_models
from reviewer.models import TaskClassifierVersion, TaskCorrection


@admin.register(TaskCorrection)
class TaskCorrectionAdmin(ReadOnlyAdmin[TaskCorrection]):
    list_display = ["session", "given", "corrected", "corrected_by", "updated_at"]
    list_filter = ["corrected", "given"]
    fields = readonly_fields = ("session", "given", "corrected", "corrected_by", "updated_at")


@admin.register(TaskClassifierVersion)
class TaskClassifierVersionAdmin(ReadOnlyAdmin[TaskClassifierVersion]):
    list_display = ["version", "enabled", "held_out_accuracy", "created_by", "created_at"]
    fields = readonly_fields = (
        "version",
        "enabled",
        "checksum",
        "metrics",
        "created_by",
        "created_at",
    )
    actions = ["enable", "disable"]

    @admin.display(description=_("held-out accuracy"))
    def held_out_accuracy(self, obj: TaskClassifierVersion) -> str:
        return f"{obj.accuracy:.1%}"

    def has_enable_permission(self, request: HttpRequest) -> bool:
        """The admin shows versions read-only; switching one is the model's change permission."""
        return request.user.has_perm("reviewer.change_taskclassifierversion")

    @admin.action(
        description=_("Enable (only at 88 %% held-out accuracy or more)"), permissions=["enable"]
    )
    def enable(self, request: HttpRequest, queryset: QuerySet[TaskClassifierVersion]) -> None:
        if queryset.count() != 1:
            self.message_user(request, _("Enable exactly one version."), messages.ERROR)
            return
        version = queryset.get()
        try:
            task_models.enable(version, request.user.get_username())
        except task_models.BelowTarget as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        message = _("Task classifier v%(version)s labels new sessions.")
        self.message_user(request, message % {"version": version.version})

    @admin.action(description=_("Disable (back to the shipped classifier)"), permissions=["enable"])
    def disable(self, request: HttpRequest, queryset: QuerySet[TaskClassifierVersion]) -> None:
        for version in queryset:
            task_models.disable(version, request.user.get_username())
        self.message_user(request, _("Disabled."))
