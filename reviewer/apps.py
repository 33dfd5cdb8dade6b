from django.apps import AppConfig


class ReviewerConfig(AppConfig):
    name = "reviewer"
    verbose_name = "Caesura review"
    default_auto_field = "django.db.models.BigAutoField"
