from django.db import migrations, models


def keep_current_codes(apps, schema_editor):
    """Edits made before the code was kept with them: the term's code now is the best left."""
    Edit = apps.get_model("reviewer", "Edit")
    for edit in Edit.objects.filter(glossary_term__isnull=False).select_related("glossary_term"):
        edit.glossary_code = edit.glossary_term.code
        edit.save(update_fields=["glossary_code"])


class Migration(migrations.Migration):
    dependencies = [
        ("reviewer", "0017_session_error_message"),
    ]

    operations = [
        migrations.AddField(
            model_name="edit",
            name="glossary_code",
            field=models.CharField(
                blank=True,
                help_text="The glossary term's code when the edit was made; none: no glossary term",
                max_length=50,
                null=True,
                verbose_name="glossary code",
            ),
        ),
        migrations.RunPython(keep_current_codes, migrations.RunPython.noop),
    ]
