from django.apps import AppConfig


class ReviewerConfig(AppConfig):
    name = "reviewer"
    verbose_name = "Caesura review"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from reviewer import roi_admin  # noqa: F401 - registers the ROI and task-decoding admins
