"""A session's seed and token limit are kept once, in its decoding parameters: the columns
that repeated them go, after their values are written into ``decoding`` (the column's token
limit is the one a segment ran with, so it wins; the seed the sampler drew with was
``decoding``'s, kept where present)."""

from django.db import migrations


def into_decoding(apps, schema_editor):
    ReviewSession = apps.get_model("reviewer", "ReviewSession")
    for session in ReviewSession.objects.only("decoding", "seed", "max_new_tokens").iterator():
        decoding = dict(session.decoding or {})
        decoding.setdefault("seed", session.seed)
        decoding["max_new_tokens"] = session.max_new_tokens
        if decoding != session.decoding:
            ReviewSession.objects.filter(pk=session.pk).update(decoding=decoding)


def into_columns(apps, schema_editor):
    ReviewSession = apps.get_model("reviewer", "ReviewSession")
    for session in ReviewSession.objects.only("decoding").iterator():
        decoding = session.decoding or {}
        ReviewSession.objects.filter(pk=session.pk).update(
            seed=decoding.get("seed", 0), max_new_tokens=decoding.get("max_new_tokens", 200)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("reviewer", "0007_pause_model_versions"),
    ]

    operations = [
        migrations.RunPython(into_decoding, into_columns),
        migrations.RemoveField(model_name="reviewsession", name="seed"),
        migrations.RemoveField(model_name="reviewsession", name="max_new_tokens"),
    ]
