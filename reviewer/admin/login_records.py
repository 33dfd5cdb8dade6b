"""django-axes' admin of login attempts, with the strings it builds made translatable: it
joins a number to a word ("3 Attempt Remaining", which no word order fits in Chinese),
and formats its clean-up message before translating it. Its expiry column showed the related
record's name ("AccessAttemptExpiration object (1)"): Django reads the reverse relation
``expiration`` before axes' method of that name, in the list and on the attempt's page."""

from __future__ import annotations

from typing import Any

from axes.admin import AccessAttemptAdmin as AxesAdmin  # registers it: this one replaces it
from axes.models import AccessAttempt, AccessAttemptExpiration
from django.conf import settings
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import formats, timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

admin.site.unregister(AccessAttempt)


def expiry_instead(names: Any) -> list[str]:
    return ["expires" if name == "expiration" else name for name in names]


@admin.register(AccessAttempt)
class AccessAttemptAdmin(AxesAdmin):  # type: ignore[misc]  # axes ships no types
    list_display = expiry_instead(AxesAdmin.list_display)
    readonly_fields = expiry_instead(AxesAdmin.readonly_fields)
    fieldsets = [
        (title, {"fields": expiry_instead(o["fields"])}) for title, o in AxesAdmin.fieldsets
    ]
    list_select_related = ["expiration"]

    @admin.display(description=_("Expires At"), ordering="expiration__expires_at")
    def expires(self, obj: AccessAttempt) -> str:
        try:
            expires_at = obj.expiration.expires_at
        except AccessAttemptExpiration.DoesNotExist:
            return str(_("Not set"))
        return formats.localize(timezone.localtime(expires_at))  # as the list's dates

    @admin.display(description=_("status"))
    def status(self, obj: AccessAttempt) -> str:
        left = settings.AXES_FAILURE_LIMIT - obj.failures_since_start
        if left <= 0:
            return str(_("Locked Out"))
        words = ngettext("%(count)d attempt remaining", "%(count)d attempts remaining", left)
        return words % {"count": left}

    @admin.action(description=_("Clean up expired attempts"), permissions=["delete"])
    def cleanup_expired_attempts(
        self, request: HttpRequest, queryset: QuerySet[AccessAttempt]
    ) -> None:
        count = self.handler.clean_expired_user_attempts(request=request)
        message = ngettext(
            "Cleaned up %(count)d expired access attempt.",
            "Cleaned up %(count)d expired access attempts.",
            count,
        )
        self.message_user(request, message % {"count": count})
