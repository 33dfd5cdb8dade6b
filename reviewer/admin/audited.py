"""What an admin changes in the settings that decide pauses and their review (policies,
domains, glossaries, ROI figures, decoding presets) goes into the audit chain: who changed
which fields of what, from what to what. A reviewer asked why a generation paused here and not
last week finds the change there. A deletion keeps every column of the row and what its
deletion took with it (a glossary's terms, a domain's policies and glossaries...), recorded
in the deletion's own transaction."""

from __future__ import annotations

from typing import Any, TypeVar

from django.contrib import admin
from django.db import models, transaction
from django.db.models.query import QuerySet
from django.forms import BaseModelFormSet
from django.http import HttpRequest

from reviewer.lifecycle import audit


def values(obj: models.Model, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The row's own columns (a foreign key by its id), as the chain stores them."""
    fields = obj._meta.concrete_fields
    row = {f.name: getattr(obj, f.attname) for f in fields if f.name not in skip}
    stored: dict[str, Any] = audit.as_stored(row)
    return stored


def changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """Field -> [before, after], for the fields that differ."""
    return {
        name: [before.get(name), value]
        for name, value in after.items()
        if before.get(name) != value
    }


def record(
    request: HttpRequest,
    obj: models.Model,
    verb: str,
    fields: dict[str, Any],
    deleted_with: dict[str, Any] | None = None,
) -> None:
    meta = obj._meta
    pk = obj.pk if obj.pk is not None else fields.get("id")  # a deleted row keeps its id here
    payload = {"model": meta.model_name, "id": pk, "name": str(obj), "fields": fields}
    if deleted_with:
        payload["deleted_with"] = deleted_with
    audit.append(f"{meta.model_name}_{verb}", request.user.get_username(), payload=payload)


def lock(model: type[models.Model], pks: list[Any]) -> None:
    """Lock the rows about to be deleted: a row added under one of them meanwhile (a term in
    the glossary) waits for the deletion, so the record names everything that went."""
    list(model._default_manager.select_for_update().filter(pk__in=pks).values_list("pk"))


M = TypeVar("M", bound=models.Model)


class AuditedChanges(admin.ModelAdmin[M]):
    """Audits every save and delete, the list page's inline edits and the inlines' rows too.
    ``audit_skip``: fields a model's admin audits in its own words already."""

    audit_skip: tuple[str, ...] = ()

    def deleted_fields(self, obj: M) -> dict[str, Any]:
        """What a deletion record keeps of the row: every column (``audit_skip`` is for the
        changes audited elsewhere; once the row is gone, this record is all there is)."""
        return values(obj)

    def deleted_with(self, obj: M) -> dict[str, Any]:
        """What goes with ``obj`` when it is deleted (the rows its deletion cascades to, the
        links it ends), as its deletion record keeps them; {}: nothing."""
        return {}

    def record_deletion(self, request: HttpRequest, obj: M) -> None:
        record(request, obj, "deleted", self.deleted_fields(obj), self.deleted_with(obj))

    def save_model(self, request: HttpRequest, obj: M, form: Any, change: bool) -> None:
        stored = type(obj)._default_manager.filter(pk=obj.pk).first() if change and obj.pk else None
        before = values(stored, self.audit_skip) if stored is not None else {}
        super().save_model(request, obj, form, change)
        fields = changed(before, values(obj, self.audit_skip))
        if fields or stored is None:
            record(request, obj, "changed" if stored is not None else "created", fields)

    def delete_model(self, request: HttpRequest, obj: M) -> None:
        with transaction.atomic():  # the record stands or falls with the deletion
            lock(type(obj), [obj.pk])
            self.record_deletion(request, obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[M]) -> None:
        with transaction.atomic():
            lock(queryset.model, list(queryset.order_by().values_list("pk", flat=True)))
            for obj in queryset:
                self.record_deletion(request, obj)
            super().delete_queryset(request, queryset)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        before = stored_rows(formset)  # the forms' instances hold the new values already
        # A deleted row's instance loses its pk: know it by the object itself.
        deleting = {id(f.instance): before.get(f.instance.pk, {}) for f in formset.deleted_forms}
        super().save_formset(request, form, formset, change)
        for obj in formset.new_objects:
            record(request, obj, "created", values(obj))
        for obj, _names in formset.changed_objects:
            record(request, obj, "changed", changed(before.get(obj.pk, {}), values(obj)))
        for obj in formset.deleted_objects:
            record(request, obj, "deleted", deleting.get(id(obj), {}))


def stored_rows(formset: Any) -> dict[Any, dict[str, Any]]:
    """pk -> the stored columns of the rows the formset shows, in one query."""
    if not isinstance(formset, BaseModelFormSet) or formset.model is None:
        return {}
    pks = [f.instance.pk for f in formset.initial_forms if f.instance.pk is not None]
    rows = formset.model._default_manager.in_bulk(pks)
    return {pk: values(obj) for pk, obj in rows.items()}
