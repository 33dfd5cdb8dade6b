"""The read-only admin of what sessions left (sessions, pauses, edits, the audit chain)
and of API tokens."""

from __future__ import annotations

from typing import Any, TypeVar

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from reviewer.lifecycle import audit
from reviewer.models import (
    ApiToken,
    AuditRecord,
    Edit,
    PauseEvent,
    ReviewSession,
)
from reviewer.web import auth

_M = TypeVar("_M", bound=Model)


class ReadOnlyAdmin(admin.ModelAdmin[_M]):
    """Records written by services; the admin shows them and may delete, never edits."""

    def has_add_permission(self, request: HttpRequest, obj: _M | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: _M | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: _M | None = None) -> bool:
        return False  # the audit chain hashes session ids: deleting a session would break it


class PauseWords:
    """A pause's trigger, kind and outcome are stored words; the admin says them in the page's
    language (reviewer.models.PauseEvent)."""

    @admin.display(description=_("trigger"), ordering="trigger")
    def trigger_word(self, obj: PauseEvent) -> str:
        return PauseEvent.trigger_word(obj.trigger)

    @admin.display(description=_("kind"), ordering="kind")
    def kind_word(self, obj: PauseEvent) -> str:
        return PauseEvent.kind_word(obj.kind)

    @admin.display(description=_("outcome"), ordering="outcome")
    def outcome_word(self, obj: PauseEvent) -> str:
        return PauseEvent.outcome_word(obj.outcome)

    @admin.display(description=_("latency (ms)"), ordering="latency_ms")
    def latency(self, obj: PauseEvent) -> str:
        """Request to halt, to a tenth of a millisecond (stored as measured: 116.37599999999999)."""
        return "-" if obj.latency_ms is None else f"{obj.latency_ms:.1f}"


class StoredWordFilter(admin.SimpleListFilter):
    """A filter on one of a pause's stored words: the values stored, named as the list
    names them (an empty one as the list's empty value)."""

    parameter_name: str  # the field

    def word(self, value: str) -> str:
        raise NotImplementedError

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        stored = model_admin.get_queryset(request).order_by(self.parameter_name)
        values = stored.values_list(self.parameter_name, flat=True).distinct()
        empty = model_admin.get_empty_value_display()
        return [(value, self.word(value) or empty) for value in values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{self.parameter_name: value}) if value is not None else queryset


class PauseKindFilter(StoredWordFilter):
    title = _("kind")
    parameter_name = "kind"

    def word(self, value: str) -> str:
        return PauseEvent.kind_word(value)


class PauseOutcomeFilter(StoredWordFilter):
    title = _("outcome")
    parameter_name = "outcome"

    def word(self, value: str) -> str:
        return PauseEvent.outcome_word(value)


class PauseEventInline(PauseWords, admin.TabularInline[PauseEvent, ReviewSession]):
    model = PauseEvent
    fields = readonly_fields = (
        "position",
        "trigger_word",
        "kind_word",
        "reason",
        "latency",
        "outcome_word",
        "halted_at",
    )
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: ReviewSession | None = None) -> bool:
        return False


class EditInline(admin.TabularInline[Edit, ReviewSession]):
    model = Edit
    fields = readonly_fields = (
        "kind",
        "start",
        "end",
        "text_before",
        "text_after",
        "author",
        "applied",
        "error",
    )
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: ReviewSession | None = None) -> bool:
        return False


@admin.register(ReviewSession)
class ReviewSessionAdmin(ReadOnlyAdmin[ReviewSession]):
    list_display = ["id", "owner", "domain", "status", "created_at", "updated_at"]
    list_filter = ["status", "domain"]
    search_fields = ["owner__username", "input_text", "text"]
    date_hierarchy = "created_at"
    inlines = [PauseEventInline, EditInline]


@admin.register(PauseEvent)
class PauseEventAdmin(PauseWords, ReadOnlyAdmin[PauseEvent]):
    list_display = ["session", "position", "trigger_word", "kind_word", "latency"]
    list_display += ["outcome_word", "halted_at"]
    list_filter = [PauseKindFilter, PauseOutcomeFilter]
    # Its own page says the stored words as the list does, in the page's language.
    fields = readonly_fields = (
        "session",
        "position",
        "trigger_word",
        "kind_word",
        "reason",
        "evidence",
        "alternatives",
        "attention",
        "requested_at",
        "halted_at",
        "resumed_at",
        "latency",
        "outcome_word",
    )


@admin.register(Edit)
class EditAdmin(ReadOnlyAdmin[Edit]):
    list_display = ["session", "kind", "start", "end", "author", "applied", "created_at"]
    list_filter = ["kind", "applied"]


@admin.register(AuditRecord)
class AuditRecordAdmin(ReadOnlyAdmin[AuditRecord]):
    """The hash chain is append-only: deleting a record would break verification."""

    list_display = ["id", "session", "actor", "action", "created_at", "hash"]
    list_filter = ["action"]
    ordering = ["-id"]  # what just happened first
    search_fields = ["actor", "action", "hash"]

    def has_delete_permission(self, request: HttpRequest, obj: AuditRecord | None = None) -> bool:
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    """Only a digest is stored: a new key is shown once, in a message, when created or rotated.
    A key acts as its user, so staff issue keys for themselves; only a superuser issues one for
    someone else. Each issue is audited: who issued it, for whom."""

    list_display = ["user", "created_at"]
    fields = ["user"]
    actions = ["rotate"]
    search_fields = ["user__username"]

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        """As with issuing: staff take away their own key; another user's, only a superuser.
        Django asks this for each object a deletion (or the bulk action) would remove."""
        if not super().has_delete_permission(request, obj):
            return False
        return obj is None or request.user.is_superuser or obj.user_id == request.user.pk

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "user" and not request.user.is_superuser:
            kwargs["queryset"] = User.objects.filter(username=request.user.get_username())
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        key = self.issue(request, obj.user)
        obj.pk = ApiToken.objects.get(user=obj.user).pk
        self.show_key(request, obj.user, key)

    @admin.action(
        description=_("Rotate the selected tokens (shows the new keys)"), permissions=["add"]
    )
    def rotate(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset.select_related("user"):
            if not (request.user.is_superuser or token.user == request.user):
                message = _("Only a superuser rotates another user's token: %(user)s kept theirs")
                self.message_user(request, message % {"user": token.user}, messages.ERROR)
                continue
            self.show_key(request, token.user, self.issue(request, token.user))

    def issue(self, request: HttpRequest, user: User) -> str:
        return auth.issue_token(user, request.user.get_username())

    @transaction.atomic
    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        self.record_deleted(request, [obj])
        super().delete_model(request, obj)

    @transaction.atomic
    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        self.record_deleted(request, list(queryset.select_related("user")))
        super().delete_queryset(request, queryset)

    def record_deleted(self, request: HttpRequest, tokens: list[ApiToken]) -> None:
        for token in tokens:  # as issuing is: who took whose key away
            payload = {"user": token.user.username}
            audit.append("api_token_deleted", request.user.get_username(), payload=payload)

    def show_key(self, request: HttpRequest, user: User, key: str) -> None:
        message = _("API token for %(user)s: %(key)s (copy it now; it is not shown again)")
        self.message_user(request, message % {"user": user, "key": key}, messages.WARNING)
