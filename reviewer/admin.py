from django.contrib import admin

from reviewer.models import Domain, Glossary, GlossaryTerm


class GlossaryTermInline(admin.TabularInline):
    model = GlossaryTerm
    extra = 1


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ["name", "specialty"]
    prepopulated_fields = {"slug": ["name"]}


@admin.register(Glossary)
class GlossaryAdmin(admin.ModelAdmin):
    list_display = ["name", "domain"]
    inlines = [GlossaryTermInline]
