from django.db import migrations, models

FIELD = {
    "blank": True,
    "help_text": "The classifier version that labelled it (0: the shipped one)",
    "null": True,
    "verbose_name": "task classifier version",
}


class Migration(migrations.Migration):
    """Sessions from before were labelled by a version nobody kept: null, so that the live
    accuracy of the version in use leaves them out; new sessions say theirs (0: shipped)."""

    dependencies = [
        ("reviewer", "0019_audit_record_keeps_its_session"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewsession",
            name="task_classifier_version",
            field=models.PositiveIntegerField(**FIELD),
        ),
        migrations.AlterField(
            model_name="reviewsession",
            name="task_classifier_version",
            field=models.PositiveIntegerField(default=0, **FIELD),
        ),
    ]
