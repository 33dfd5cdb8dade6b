"""The interface speaks English and Simplified Chinese: the browser's language, or the user's choice."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command

from reviewer.management.commands.compile_translations import catalogs
from tests.conftest import REPO

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def compiled_catalogs(settings):
    """The .mo files are build output: compile them, and make Django reload its catalogs."""
    call_command("compile_translations", verbosity=0)
    settings.LOCALE_PATHS = list(settings.LOCALE_PATHS)  # a changed setting resets the cache


def test_it_has_a_compiled_chinese_catalog():
    catalog = [po for po in catalogs() if "zh_Hans" in po.parts]
    assert catalog, "frontend/locale/zh_Hans/LC_MESSAGES/django.po is missing"
    assert catalog[0].with_suffix(".mo").exists()


def test_it_shows_the_login_page_in_the_browsers_language(client):
    chinese = client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    page = chinese.content.decode()
    assert "登录" in page and "用户名" in page and "密码" in page
    assert 'lang="zh-hans"' in page
    english = client.get("/login/", HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9").content.decode()
    assert "Log in" in english and "登录" not in english


def test_it_switches_language_through_setlang(client):
    answer = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/login/"})
    assert answer.status_code == 302 and answer["Location"] == "/login/"
    page = client.get("/login/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "登录" in page  # the chosen language wins over the browser's
    client.post("/i18n/setlang/", {"language": "en", "next": "/login/"})
    page = client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "Log in" in page and "登录" not in page


def test_it_translates_the_policy_admin(client, admin_user):
    client.force_login(admin_user)
    page = client.get(
        "/admin/reviewer/pausepolicy/add/", HTTP_ACCEPT_LANGUAGE="zh-CN"
    ).content.decode()
    assert "选择暂停策略的类型" in page and "关键词" in page and "正则表达式" in page


def test_the_admin_is_named_for_caesura_in_both_languages(client, admin_user):
    client.force_login(admin_user)
    english = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Caesura administration" in english and "| Caesura admin</title>" in english
    assert "Django administration" not in english
    chinese = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "Caesura 管理</a>" in chinese and "| Caesura 管理后台</title>" in chinese
    assert "Django 管理" not in chinese


ADMIN_MODEL = re.compile(r'<th scope="row" id="([\w-]+)">\s*<a href="[^"]*">([^<]*)</a>')
HAN = re.compile("[\u4e00-\u9fff]")
ADMIN_APP = re.compile(r'<a href="/admin/reviewer/" class="section"[^>]*>([^<]*)</a>')
COLUMN = re.compile(
    r'<th scope="col" class="[^"]*column-(\w+)[^"]*">.*?<div class="text">(?:<a [^>]*>|<span>)'
    r"([^<]*)<",
    re.S,
)


def admin_index(client, language: str) -> tuple[str, dict[str, str], str]:
    """The admin's index page: the project app's name, each model's link text by the row's id
    ("reviewer-application"), and the whole page."""
    page = client.get("/admin/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
    return ADMIN_APP.search(page).group(1), dict(ADMIN_MODEL.findall(page)), page


# The admin's names in English, as Django derived them before they were translated.
ENGLISH_NAMES = {
    "reviewer-application": "Applications",
    "reviewer-pausepolicy": "Pause policies",
    "reviewer-reviewsession": "Review sessions",
    "reviewer-glossary": "Glossaries",
    "reviewer-domain": "Domains",
    "reviewer-pauseevent": "Pause events",
    "reviewer-edit": "Edits",
    "reviewer-auditrecord": "Audit records",
    "reviewer-apitoken": "Api tokens",
    "reviewer-taskcorrection": "Task corrections",
    "reviewer-taskclassifierversion": "Task classifier versions",
    "axes-accessattempt": "Access attempts",
    "axes-accesslog": "Access logs",
    "axes-accessfailurelog": "Access failures",
}


def test_it_names_the_admins_app_and_models_in_chinese(client, admin_user):
    client.force_login(admin_user)
    app, models, page = admin_index(client, "zh-CN")
    assert app == "Caesura 审阅"
    assert models["reviewer-application"] == "应用"
    assert models["reviewer-pausepolicy"] == "暂停策略"
    assert models["reviewer-reviewsession"] == "审阅会话"
    assert models["reviewer-glossary"] == "术语表"
    assert models["axes-accessattempt"] == "登录尝试"
    assert models["axes-accesslog"] == "登录日志"
    assert models["axes-accessfailurelog"] == "登录失败记录"
    untranslated = {row: models[row] for row in ENGLISH_NAMES if not HAN.search(models[row])}
    assert not untranslated, untranslated
    assert "Caesura review" not in page and "Pause policies" not in page


def test_it_keeps_the_admins_english_names_in_english(client, admin_user):
    client.force_login(admin_user)
    app, models, _page = admin_index(client, "en")
    assert app == "Caesura review"
    assert {row: models[row] for row in ENGLISH_NAMES} == ENGLISH_NAMES


def test_it_translates_a_change_lists_columns(client, admin_user):
    from reviewer.models import Application

    Application.objects.create(name="intake", key_digest="0" * 64, key_prefix="csk_0000")
    client.force_login(admin_user)
    url = "/admin/reviewer/application/"
    chinese = dict(COLUMN.findall(client.get(url, HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()))
    assert chinese == {
        "name": "名称",
        "key_prefix": "密钥前缀",
        "domain_list": "领域",
        "active": "有效",
        "max_concurrent": "并发生成数",
        "requests_per_minute": "每分钟请求数",
        "created_at": "创建时间",
    }
    english = dict(COLUMN.findall(client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()))
    assert english["key_prefix"] == "Key prefix" and english["created_at"] == "Created at"


def test_it_translates_the_task_classifiers_actions_and_messages(client, admin_user):
    from reviewer.analytics import task_models
    from reviewer.lifecycle import task_types

    low = task_models.store_version(task_types.load_examples(), {"accuracy": 0.8}, "test")
    client.force_login(admin_user)
    url = "/admin/reviewer/taskclassifierversion/"
    page = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "启用（留出集准确率须达到 88 % 或以上）" in page and "留出集准确率" in page
    body = {"action": "enable", "_selected_action": [low.pk]}
    answer = client.post(url, body, follow=True, HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "任务分类器第 1 版：留出集准确率 80.0%，低于 88% 的目标；仍保持停用" in answer
    answer = client.post(url, body, follow=True, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "held-out accuracy 80.0% is below the 88% target; it stays disabled" in answer


def test_it_reports_glossary_errors_in_chinese(admin_user):
    from django.utils import translation

    from reviewer.documents.glossary_csv import GlossaryImportError, parse_csv

    with translation.override("zh-hans"), pytest.raises(GlossaryImportError) as caught:
        parse_csv("term,preferred\n高血压,\n".encode())
    assert caught.value.errors == ["第 2 行：preferred 为空"]


def chinese_catalog():
    import polib

    return polib.pofile(str(next(po for po in catalogs() if "zh_Hans" in po.parts)))


def test_it_translates_every_message_of_the_catalog():
    catalog = chinese_catalog()
    untranslated = [e.msgid for e in catalog.untranslated_entries()]
    fuzzy = [e.msgid for e in catalog.fuzzy_entries()]
    assert not untranslated and not fuzzy, {"untranslated": untranslated, "fuzzy": fuzzy}


TRANSLATE_TAG = re.compile(r"""\{%\s*translate\s+(["'])(.+?)\1\s*(?:as\s+\w+\s*)?%\}""")
GETTEXT_CALL = re.compile(r"""\b_\(\s*"((?:[^"\\]|\\.)+)"\s*[,)]""")


def test_it_has_every_simple_ui_string_in_the_catalog():
    """{% translate "..." %} in templates and _("...") in the app, minus makemessages' run."""
    known = {e.msgid for e in chinese_catalog()}
    found = set()
    for template in (REPO / "frontend" / "templates").rglob("*.html"):
        found |= {m.group(2) for m in TRANSLATE_TAG.finditer(template.read_text())}
    for module in (REPO / "reviewer").rglob("*.py"):
        found |= {m.group(1) for m in GETTEXT_CALL.finditer(module.read_text())}
    django_own = {"Home"}  # translated by Django's admin catalog as well
    missing = sorted(found - known - django_own)
    assert not missing, f"run makemessages and translate: {missing}"
