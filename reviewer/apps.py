from axes.apps import AppConfig as AxesConfig
from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReviewerConfig(AppConfig):
    default = True  # this module holds two configurations; "reviewer" means this one
    name = "reviewer"
    verbose_name = _("Caesura review")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from axes.signals import user_locked_out

        from reviewer.web import lockout

        user_locked_out.connect(lockout.on_locked_out, dispatch_uid="caesura-lockout")


class LoginRecordsConfig(AxesConfig):  # type: ignore[misc]  # axes ships no types
    """django-axes under a name an admin understands: its app is listed as "Axes"."""

    verbose_name = _("Login records")
