"""django-axes' admin of login attempts, with the strings it builds made translatable: it
joins a number to a word ("3 Attempt Remaining", which no word order fits in Chinese),
and formats its clean-up message before translating it."""

from __future__ import annotations

import axes.admin  # registers axes' own admin first, so this one replaces it
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

admin.site.unregister(AccessAttempt)


@admin.register(AccessAttempt)
class AccessAttemptAdmin(axes.admin.AccessAttemptAdmin):  # type: ignore[misc]  # untyped
    @admin.display(description=_("status"))
    def status(self, obj: AccessAttempt) -> str:
        left = settings.AXES_FAILURE_LIMIT - obj.failures_since_start
        if left <= 0:
            return str(_("Locked Out"))
        words = ngettext("%(count)d attempt remaining", "%(count)d attempts remaining", left)
        return words % {"count": left}

    @admin.action(description=_("Clean up expired attempts"))
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
