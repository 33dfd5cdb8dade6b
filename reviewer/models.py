"""What Caesura keeps in Postgres."""

from __future__ import annotations

from django.db import models


class Domain(models.Model):
    """A field of review (clinical notes, contracts, ...) with its prompt and decoding defaults."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    specialty = models.CharField(max_length=50, help_text="medical, legal, insurance, patent, ...")
    system_prompt = models.TextField()
    decoding = models.JSONField(default=dict, blank=True, help_text="Default sampling parameters")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Glossary(models.Model):
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="glossaries")
    name = models.CharField(max_length=100)

    class Meta:
        unique_together = [("domain", "name")]
        verbose_name_plural = "glossaries"

    def __str__(self) -> str:
        return f"{self.domain}: {self.name}"


class GlossaryTerm(models.Model):
    glossary = models.ForeignKey(Glossary, on_delete=models.CASCADE, related_name="terms")
    term = models.CharField(max_length=200)
    preferred = models.CharField(max_length=300, help_text="Preferred replacement")
    code = models.CharField(max_length=50, blank=True, help_text="ICD-10, IPC or clause code")
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["term"]
        unique_together = [("glossary", "term")]

    def __str__(self) -> str:
        return f"{self.term} → {self.preferred}"
