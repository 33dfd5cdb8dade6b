"""The interface speaks English and Simplified Chinese: the browser's language, or the user's choice."""

from __future__ import annotations

import json
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
    # Every kind named and described in Chinese, the learned one too.
    assert "学习型" in page and "预计审阅人会介入" in page
    form = client.get(
        "/admin/reviewer/pausepolicy/add/?kind=learned", HTTP_ACCEPT_LANGUAGE="zh-CN"
    ).content.decode()
    assert "模型文件" in form and "校验和" in form and "训练好的暂停模型文件的路径" in form
    assert "Path of the trained" not in form


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


AXES_APP = re.compile(r'<a href="/admin/axes/" class="section"[^>]*>([^<]*)</a>')


def test_it_names_the_login_records_for_what_they_are_in_both_languages(client, admin_user):
    """django-axes' app was listed as "Axes", a name that tells an admin nothing."""
    client.force_login(admin_user)
    for language, name in (("en", "Login records"), ("zh-CN", "登录记录")):
        page = client.get("/admin/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
        assert AXES_APP.search(page).group(1) == name
        assert ">Axes<" not in page


def test_it_says_a_login_attempts_status_and_clean_up_in_the_page_language(client, admin_user):
    """axes joined the number to its words ("3 次剩余机会") and formatted its message before
    translating it."""
    from datetime import UTC, datetime

    from axes.models import AccessAttempt, AccessAttemptExpiration
    from django.conf import settings
    from django.utils import formats, timezone, translation

    AccessAttempt.objects.create(username="pia", ip_address="10.0.0.7", failures_since_start=2)
    left = settings.AXES_FAILURE_LIMIT - 2
    client.force_login(admin_user)
    url = "/admin/axes/accessattempt/"
    chinese = admin_page(client, url, "zh-CN")
    assert cells(chinese, "status") == [f"还剩 {left} 次机会"]
    assert {"status": "状态", "expires": "过期时间"}.items() <= headers(chinese).items()
    assert cells(chinese, "expires") == ["未设置"]
    english = admin_page(client, url, "en")
    assert cells(english, "status") == [f"{left} attempts remaining"]
    assert headers(english)["status"] == "Status"
    assert cells(english, "expires") == ["Not set"]
    # Its expiry, not the related record's name ("AccessAttemptExpiration object (1)").
    attempt = AccessAttempt.objects.get()
    AccessAttemptExpiration.objects.create(
        access_attempt=attempt, expires_at=datetime(2031, 5, 4, 3, 2, tzinfo=UTC)
    )
    with translation.override("en"):
        shown = formats.localize(timezone.localtime(attempt.expiration.expires_at))
    english = admin_page(client, url, "en")
    assert "2031" in cells(english, "expires")[0] and "Expiration object" not in english
    page = admin_page(client, f"{url}{attempt.pk}/change/", "en")
    assert readonly_value(page, "expires") == shown
    AccessAttempt.objects.update(failures_since_start=settings.AXES_FAILURE_LIMIT)
    assert cells(admin_page(client, url, "zh-CN"), "status") == ["已锁定"]
    form = {"action": "cleanup_expired_attempts", "_selected_action": [str(attempt.pk)]}
    answer = client.post(url, form, HTTP_ACCEPT_LANGUAGE="zh-CN", follow=True)
    assert "已清理 0 条过期的登录尝试。" in answer.content.decode()
    answer = client.post(url, form, HTTP_ACCEPT_LANGUAGE="en", follow=True)
    assert "Cleaned up 0 expired access attempts." in answer.content.decode()
    assert AccessAttempt.objects.count() == 1  # not expired: kept


def test_it_names_a_demo_domains_specialty_in_the_queue_pages_language(client, alice):
    from reviewer.models import Domain

    domain = Domain.objects.create(name="Notes", slug="notes", specialty="medical")
    custom = Domain.objects.create(name="Ships", slug="ships", specialty="maritime")
    domain.reviewers.add(alice)
    custom.reviewers.add(alice)
    client.force_login(alice)
    chinese = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert '<span class="muted">医疗 ·' in chinese
    assert '<span class="muted">maritime ·' in chinese  # an admin's own word stays as written
    english = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<span class="muted">medical ·' in english


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


TRANSLATE_TAG = re.compile(
    r"""\{%\s*translate\s+(["'])(.+?)\1(?:\s+context\s+(["'])(.+?)\3)?\s*(?:as\s+\w+\s*)?%\}"""
)
GETTEXT = {"_", "gettext", "gettext_lazy", "gettext_noop", "_lazy"}
PGETTEXT = {"pgettext", "pgettext_lazy"}


def gettext_calls(source: str) -> set[tuple[str, str]]:
    """(context, msgid) of every gettext call with literal text, a message split over lines
    included (the parser joins its parts)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        literals = [a.value for a in node.args if isinstance(a, ast.Constant)]
        if name in GETTEXT and literals and node.args[0].value == literals[0]:
            found.add(("", literals[0]))
        elif name in PGETTEXT and len(literals) == 2 == len(node.args):
            found.add((literals[0], literals[1]))
    return found


def test_it_has_every_simple_ui_string_in_the_catalog():
    """{% translate "..." %} in templates and gettext calls in the app, minus makemessages' run."""
    known = {(e.msgctxt or "", e.msgid) for e in chinese_catalog()}
    found = set()
    for template in (REPO / "frontend" / "templates").rglob("*.html"):
        # The tag doubles a literal's percent signs before it looks the msgid up.
        text = template.read_text()
        found |= {
            (m.group(4) or "", m.group(2).replace("%", "%%")) for m in TRANSLATE_TAG.finditer(text)
        }
    for module in (REPO / "reviewer").rglob("*.py"):
        found |= gettext_calls(module.read_text())
    django_own = {("", "Home")}  # translated by Django's admin catalog as well
    missing = sorted(found - known - django_own)
    assert len(found) > 500  # the scan found them
    assert not missing, f"run makemessages and translate: {missing}"


def engine_message_templates() -> set[str]:
    """Every Message template inference/ and the worker write: the argument a function names
    ``template`` (Message's own first one, and its callers' in each module), a literal there or
    a literal assigned to ``template`` (the two ways the code makes them)."""
    import ast

    found = set()
    modules = [*(REPO / "inference").rglob("*.py"), *(REPO / "reviewer" / "worker").rglob("*.py")]
    for module in modules:
        tree = ast.parse(module.read_text())
        takes = {"Message": 0} | {
            node.name: [a.arg for a in node.args.args].index("template")
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and "template" in [a.arg for a in node.args.args]
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in takes:
                given = node.args[takes[node.func.id]]
                literal = isinstance(given, ast.Constant)
                assert literal or getattr(given, "id", "") == "template", (
                    f"{module}:{node.lineno}: a message's template must be a literal or `template`"
                )
                found |= {given.value} if literal else set()
            if any(getattr(t, "id", None) == "template" for t in getattr(node, "targets", [])):
                assert isinstance(node.value, ast.Constant), f"{module}: template = a literal"
                found.add(node.value.value)
    return found


def test_it_has_every_engine_message_in_the_catalog():
    templates = engine_message_templates()
    assert len(templates) > 30  # the scan found them
    catalog = {e.msgid: e.msgstr for e in chinese_catalog()}
    missing = sorted(templates - set(catalog))
    assert not missing, f"translate the engine's messages: {missing}"
    placeholder = re.compile(r"%\(\w+\)[sr]")
    for template in templates:  # the translation fills in the same values
        assert sorted(placeholder.findall(catalog[template])) == sorted(
            placeholder.findall(template)
        ), template


def test_it_says_what_is_wrong_with_a_policy_in_the_pages_language(client, admin_user):
    from django.utils import translation

    from inference.policies import PolicyConfigError, build_policy
    from reviewer.models import Domain, PausePolicy
    from reviewer.web.ui_text import error_text

    def refusal(spec: dict) -> PolicyConfigError:
        with pytest.raises(PolicyConfigError) as caught:
            build_policy(spec)
        return caught.value

    range_ = refusal({"name": "低置信", "kind": "low_confidence", "params": {"threshold": 2}})
    nested = refusal({"name": "码", "kind": "regex", "params": {"pattern": "(a+)+$"}})
    action = refusal(
        {"name": "词", "kind": "keyword", "action": "explode", "params": {"keywords": ["x"]}}
    )
    with translation.override("zh-hans"):
        assert error_text(range_) == (
            "策略“低置信”（low_confidence）：参数“threshold”必须是 <= 1.0，而不是 2"
        )
        assert error_text(nested).startswith("策略“码”（regex）：参数“pattern”被拒绝：")
        assert "可能导致灾难性回溯" in error_text(nested)
        assert error_text(action).endswith('动作 \'explode\' 必须是 "pause" 或 "flag"')
    with translation.override("en"):  # English as the engine wrote it, word for word
        for refused in (range_, nested, action):
            assert error_text(refused) == str(refused)

    # Where an admin meets it: the policy's form in the admin, on a Chinese page.
    from tests.test_policy_forms import form_data

    domain = Domain.objects.create(name="Ward")
    client.force_login(admin_user)
    url = "/admin/reviewer/pausepolicy/add/?kind=regex"
    page = client.post(
        url, form_data(domain, "regex", pattern="(a+)+$"), HTTP_ACCEPT_LANGUAGE="zh-CN"
    ).content.decode()
    assert "被拒绝" in page and "可能导致灾难性回溯" in page and "backtrack" not in page
    assert not PausePolicy.objects.exists()


def test_it_says_what_is_wrong_with_a_domains_decoding_in_the_pages_language():
    from django.core.exceptions import ValidationError
    from django.utils import translation

    from reviewer.models import Domain

    hot = Domain(name="Hot", slug="hot", decoding={"temperature": 500})
    narrow = Domain(
        name="Narrow", slug="narrow", attention="gated", gate_top_k=9, gate_wide_top_k=2
    )
    with translation.override("zh-hans"):
        with pytest.raises(ValidationError) as caught:
            hot.clean()
        assert caught.value.message_dict["decoding"] == [
            "temperature 必须为 0（贪心）或在 [0.001, 100.0] 之间"
        ]
        with pytest.raises(ValidationError) as caught:
            narrow.clean()
        assert caught.value.message_dict["gate_wide_top_k"] == [
            "attention.wide_top_k 必须大于或等于 top_k"
        ]
    with translation.override("en"), pytest.raises(ValidationError) as caught:
        hot.clean()
    assert caught.value.message_dict["decoding"][0].startswith("temperature must be 0 (greedy)")


# The admin's choice labels, help texts and object names: Chinese on a Chinese page, English as
# stored on an English one; the API keeps the stored words whatever the page's language.

CELL = re.compile(r'<t[dh] class="field-(\w+)[^"]*">(?:<a [^>]*>)?([^<]*)<')
HEADER = re.compile(
    r'<th scope="col" class="[^"]*column-(\w+)[^"]*">.*?<(?:a|span)[^>]*>([^<]*)<', re.S
)
FILTER_CHOICE = re.compile(r'<a href="\?(\w+)=([^"&]+)">([^<]*)</a>')
OPTION = re.compile(r'<option value="(\w+)"[^>]*>([^<]*)</option>')
HELP = re.compile(r'<div class="help"[^>]*>\s*(?:<div>)?([^<]+)<')
BREADCRUMBS = re.compile(r'<div class="breadcrumbs">(.*?)</div>', re.S)


def admin_page(client, url: str, language: str) -> str:
    answer = client.get(url, HTTP_ACCEPT_LANGUAGE=language)
    assert answer.status_code == 200, url
    return answer.content.decode()


def cells(page: str, column: str) -> list[str]:
    return [text.strip() for name, text in CELL.findall(page) if name == column]


def headers(page: str) -> dict[str, str]:
    """A change list's column headers, by column."""
    return {name: text.strip() for name, text in HEADER.findall(page)}


def filter_choices(page: str, parameter: str) -> dict[str, str]:
    return {value: text for name, value, text in FILTER_CHOICE.findall(page) if name == parameter}


def options(page: str) -> dict[str, str]:
    return dict(OPTION.findall(page))


def readonly_value(page: str, field: str) -> str:
    """What an object's own page shows for a read-only field."""
    found = re.search(rf'field-{field}\b.*?<div class="readonly">(.*?)</div>', page, re.S)
    assert found, field
    return found.group(1).strip()


def breadcrumb(page: str) -> str:
    """The breadcrumbs' last step: the object's name."""
    return BREADCRUMBS.search(page).group(1).rsplit("&rsaquo;", 1)[1].strip()


def test_it_shows_session_statuses_in_chinese_in_the_sessions_list_and_filter(
    client, admin_user, alice
):
    from tests.session_factory import make_session

    make_session(alice)  # paused
    make_session(alice, status="completed")
    client.force_login(admin_user)
    url = "/admin/reviewer/reviewsession/"
    chinese = admin_page(client, url, "zh-CN")
    assert sorted(cells(chinese, "status")) == sorted(["已暂停", "已批准"])
    statuses = filter_choices(chinese, "status__exact")
    assert statuses["generated"] == "已生成，待决定" and statuses["draft"] == "草稿"
    assert statuses["running"] == "生成中" and statuses["failed"] == "失败"
    english = admin_page(client, url, "en")
    assert sorted(cells(english, "status")) == ["completed", "paused"]
    assert filter_choices(english, "status__exact")["generated"] == "generated, awaiting decision"


def test_it_names_a_session_in_chinese_in_breadcrumbs_and_lists(client, admin_user, alice):
    from tests.session_factory import make_session

    session = make_session(alice, status="generated")
    pause = make_session(alice).pauses.get()
    client.force_login(admin_user)
    url = f"/admin/reviewer/reviewsession/{session.pk}/change/"
    assert breadcrumb(admin_page(client, url, "zh-CN")) == f"会话 {session.pk}（已生成）"
    assert breadcrumb(admin_page(client, url, "en")) == f"Session {session.pk} (generated)"
    chinese = admin_page(client, "/admin/reviewer/pauseevent/", "zh-CN")
    assert cells(chinese, "session") == [f"会话 {pause.session_id}（已暂停）"]
    url = f"/admin/reviewer/reviewsession/{pause.session_id}/change/"
    inline = admin_page(client, url, "zh-CN")  # its pauses, below the session
    assert re.search(r'field-kind_word">\s*<p>手动</p>', inline)
    assert re.search(r'field-trigger_word">\s*<p>手动</p>', inline)
    url = f"/admin/reviewer/pauseevent/{pause.pk}/change/"
    assert breadcrumb(admin_page(client, url, "zh-CN")) == f"暂停事件 {pause.pk}"
    assert breadcrumb(admin_page(client, url, "en")) == f"Pause event {pause.pk}"
    # Its latency to a tenth of a millisecond, not as the float was stored.
    pause.latency_ms = 116.37599999999999
    pause.save(update_fields=["latency_ms"])
    listed = admin_page(client, "/admin/reviewer/pauseevent/", "en")
    assert cells(listed, "latency") == ["116.4"]


def test_it_names_roi_settings_api_tokens_and_corrections_in_chinese(client, admin_user, alice):
    from reviewer.models import ApiToken, RoiSettings, TaskCorrection
    from reviewer.web.auth import issue_token
    from tests.session_factory import clinical_notes, make_session

    roi = RoiSettings.objects.create(domain=clinical_notes())
    issue_token(alice)
    token = ApiToken.objects.get(user=alice)
    session = make_session(alice, task_type="open")
    correction = TaskCorrection.objects.create(
        session=session, given="open", corrected="reasoning", corrected_by="alice"
    )
    client.force_login(admin_user)
    pages = {
        f"/admin/reviewer/roisettings/{roi.pk}/change/": (
            "Clinical notes 的 ROI 设置",
            "ROI settings of Clinical notes",
        ),
        f"/admin/reviewer/apitoken/{token.pk}/change/": ("alice 的 API 令牌", "API token of alice"),
        f"/admin/reviewer/taskcorrection/{correction.pk}/change/": (
            f"会话 {session.pk}：开放式 -&gt; 推理",
            f"session {session.pk}: open -&gt; reasoning",
        ),
    }
    for url, (chinese, english) in pages.items():
        assert breadcrumb(admin_page(client, url, "zh-CN")) == chinese
        assert breadcrumb(admin_page(client, url, "en")) == english


def test_it_offers_a_domains_choices_and_help_in_the_page_language(client, admin_user):
    client.force_login(admin_user)
    url = "/admin/reviewer/domain/add/"
    chinese = admin_page(client, url, "zh-CN")
    offered = options(chinese)
    assert offered["after_review"] == "审阅后交付：审阅人批准之前，什么都不发出"
    assert offered["delayed"] == "延迟交付：文本落后模型几句，以流式发出"
    assert offered["full"] == "完整：每一步都看所有位置"
    assert offered["gated"] == "门控：汇聚点、最近窗口、重点位置和锚点"
    helps = [text.strip() for text in HELP.findall(chinese)]
    assert "调用网关的应用收到什么" in helps and "保留的开头位置数" in helps
    assert not [text for text in helps if not HAN.search(text)], helps
    english = admin_page(client, url, "en")
    assert options(english)["after_review"] == (
        "after review: nothing leaves before a reviewer approves"
    )
    assert (
        options(english)["gated"] == "gated: sinks, a recent window, heavy hitters and the anchors"
    )
    assert "What an application calling the gateway receives" in english


def test_it_shows_a_policys_action_and_kind_in_chinese(client, admin_user):
    from reviewer.models import PausePolicy
    from tests.session_factory import clinical_notes

    policy = PausePolicy.objects.create(
        domain=clinical_notes(), name="fever", kind="keyword", action="flag", params={}
    )
    client.force_login(admin_user)
    url = "/admin/reviewer/pausepolicy/"
    chinese = admin_page(client, url, "zh-CN")
    assert cells(chinese, "action") == ["标记"]
    assert filter_choices(chinese, "action__exact") == {
        "pause": "暂停",
        "rollback": "回退",
        "flag": "标记",
    }
    english = admin_page(client, url, "en")
    assert cells(english, "action") == ["flag"]
    assert filter_choices(english, "action__exact")["rollback"] == "rollback"
    change = f"/admin/reviewer/pausepolicy/{policy.pk}/change/"
    assert breadcrumb(admin_page(client, change, "zh-CN")) == "Clinical notes: fever (关键词)"
    assert breadcrumb(admin_page(client, change, "en")) == "Clinical notes: fever (keyword)"


def test_it_shows_pause_kinds_outcomes_and_edit_kinds_in_chinese(client, admin_user, alice):
    from django.utils import timezone

    from reviewer.models import Edit, PauseEvent
    from tests.session_factory import make_session

    session = make_session(alice)
    pause = session.pauses.get()  # manual, still open
    PauseEvent.objects.create(
        session=session,
        position=3,
        trigger="fever",
        kind="keyword",
        reason="Keyword",
        outcome="rolled back",
        halted_at=timezone.now(),
    )
    Edit.objects.create(session=session, pause=pause, kind="truncate", start=3, author=alice)
    client.force_login(admin_user)
    chinese = admin_page(client, "/admin/reviewer/pauseevent/", "zh-CN")
    assert sorted(cells(chinese, "kind_word")) == sorted(["手动", "关键词"])
    assert sorted(cells(chinese, "trigger_word")) == sorted(["手动", "fever"])
    assert "已回退" in cells(chinese, "outcome_word")
    assert filter_choices(chinese, "kind") == {"keyword": "关键词", "manual": "手动"}
    assert filter_choices(chinese, "outcome")["rolled+back"] == "已回退"
    english = admin_page(client, "/admin/reviewer/pauseevent/", "en")
    assert sorted(cells(english, "kind_word")) == ["keyword", "manual"]
    assert filter_choices(english, "outcome")["rolled+back"] == "rolled back"
    filtered = admin_page(client, "/admin/reviewer/pauseevent/?kind=keyword", "en")
    assert cells(filtered, "kind_word") == ["keyword"]
    keyword = PauseEvent.objects.get(kind="keyword")
    page = admin_page(client, f"/admin/reviewer/pauseevent/{keyword.pk}/change/", "zh-CN")
    assert readonly_value(page, "kind_word") == "关键词"
    assert readonly_value(page, "outcome_word") == "已回退"
    assert readonly_value(page, "trigger_word") == "fever"  # a policy's own name
    page = admin_page(client, f"/admin/reviewer/pauseevent/{pause.pk}/change/", "zh-CN")
    assert readonly_value(page, "trigger_word") == "手动"
    page = admin_page(client, f"/admin/reviewer/pauseevent/{keyword.pk}/change/", "en")
    assert readonly_value(page, "kind_word") == "keyword"
    assert readonly_value(page, "outcome_word") == "rolled back"
    edits = admin_page(client, "/admin/reviewer/edit/", "zh-CN")
    assert cells(edits, "kind") == ["截断"]
    assert filter_choices(edits, "kind__exact")["choose"] == "选用候选词"
    assert cells(admin_page(client, "/admin/reviewer/edit/", "en"), "kind") == ["truncate"]


def test_it_names_task_types_in_chinese_where_the_admin_shows_them(client, admin_user):
    from reviewer.models import TaskDecoding
    from tests.session_factory import clinical_notes

    TaskDecoding.objects.create(domain=clinical_notes(), task_type="open")
    client.force_login(admin_user)
    chinese = admin_page(client, "/admin/reviewer/taskdecoding/", "zh-CN")
    assert cells(chinese, "task_type") == ["开放式"]  # the task type, not "未结束" (not ended)
    assert filter_choices(chinese, "task_type__exact") == {
        "deterministic": "确定性",
        "open": "开放式",
        "reasoning": "推理",
    }
    english = admin_page(client, "/admin/reviewer/taskdecoding/", "en")
    assert cells(english, "task_type") == ["open"]
    assert "Sampling parameters, e.g." in admin_page(
        client, "/admin/reviewer/taskdecoding/add/", "en"
    )
    assert "采样参数，例如" in admin_page(client, "/admin/reviewer/taskdecoding/add/", "zh-CN")


def test_it_has_a_word_for_every_policy_kind():
    from inference.policies import POLICY_KINDS
    from reviewer.models.domain import POLICY_KIND_WORDS

    assert set(POLICY_KINDS) <= set(POLICY_KIND_WORDS)


def test_the_api_keeps_the_stored_words_on_a_chinese_request(alice):
    from django.test import Client

    from reviewer.models import Edit, TaskCorrection
    from tests.session_factory import make_session

    session = make_session(alice, task_type="open", task_source="classifier")
    pause = session.pauses.get()
    pause.outcome = "rolled back"
    pause.save()
    Edit.objects.create(session=session, pause=pause, kind="truncate", start=3, author=alice)
    TaskCorrection.objects.create(
        session=session, given="open", corrected="reasoning", corrected_by="alice"
    )
    client = Client()
    client.force_login(alice)
    detail = client.get(f"/api/sessions/{session.pk}", HTTP_ACCEPT_LANGUAGE="zh-CN").json()
    assert detail["status"] == "paused" and detail["task_type"] == "open"
    assert detail["task_source"] == "classifier"
    assert detail["pauses"][0]["kind"] == "manual"
    assert detail["pauses"][0]["outcome"] == "rolled back"
    assert detail["edits"][0]["kind"] == "truncate"
    assert detail["task_correction"]["given"] == "open"
    assert detail["task_correction"]["corrected"] == "reasoning"
    listed = client.get("/api/sessions", HTTP_ACCEPT_LANGUAGE="zh-CN").json()["sessions"]
    assert [row["status"] for row in listed] == ["paused"]


def test_the_admins_two_box_chooser_speaks_chinese(client, admin_user):
    """Django's own Chinese catalog for the admin's scripts lacks the chooser's newer
    strings ("Choose all %s", ...): ours fills them, so no button reads half in English."""
    client.force_login(admin_user)
    catalog = client.get("/admin/jsi18n/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    for english, chinese in [
        ("Choose all %s", "选择全部%s"),
        ("Choose selected %s", "选择选中的%s"),
        ("Remove all %s", "删除全部%s"),
        ("Remove selected %s", "删除选中的%s"),
        ("Available %s", "可用 %s"),  # Django's own, still there
    ]:
        assert f"{json.dumps(english)}: {json.dumps(chinese)}" in catalog, english
    english = client.get("/admin/jsi18n/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "选择" not in english


def test_it_names_where_a_queued_generation_came_from_as_a_source(client, alice):
    """ "From" over the queue's origin column reads 来源 (a source), not the 从 of a date range."""
    from tests.session_factory import make_session

    make_session(alice)
    client.force_login(alice)
    chinese = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-CN").content.decode()
    assert "<th>来源</th>" in chinese and 'data-label="来源"' in chinese
    english = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "<th>From</th>" in english and 'data-label="From"' in english
