"""The catalogues: every message the code says is translated, with the same placeholders; no error's sentence
is built before its lookup; the language a request asks for is the one it gets."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from workspace import i18n
from workspace.errors import UserError
from workspace.setup import messages

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template():
    return messages.extract()


@pytest.mark.parametrize("locale", [loc for loc in i18n.LOCALES if loc != i18n.DEFAULT])
def test_every_message_is_translated(template, locale):
    missing = messages.missing(locale, template)
    assert not missing, (
        f"{len(missing)} message(s) have no {locale} translation: run `make messages`, then translate them in "
        f"{messages.po_path(locale).relative_to(ROOT)}:\n" + "\n".join(missing[:40])
    )


def placeholders(text: str) -> set[str]:
    return set(re.findall(r"\{(\w+)(?:[:!][^}]*)?\}", text)) | set(re.findall(r"%\((\w+)\)s", text))


@pytest.mark.parametrize("locale", [loc for loc in i18n.LOCALES if loc != i18n.DEFAULT])
def test_translations_keep_the_placeholders(locale):
    wrong = []
    for m in messages.read(locale):
        if not m.id or not m.string:
            continue
        ids = m.id if isinstance(m.id, (list, tuple)) else [m.id]
        strings = m.string if isinstance(m.string, (list, tuple)) else [m.string]
        want = set().union(*(placeholders(i) for i in ids))
        for s in strings:
            if s and placeholders(s) != want:
                wrong.append(f"{ids[0]!r}: {s!r}")
    assert not wrong, "translations whose placeholders differ from the message's:\n" + "\n".join(wrong)


def test_no_error_sentence_is_built_before_its_lookup():
    """UserError(status, "literal {x}", x=...): an f-string, a `+` or a .format() there cannot be looked up."""
    built = []
    for path in sorted((ROOT / "workspace").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "UserError"
            ):
                continue
            message = (
                node.args[1]
                if len(node.args) > 1
                else next((k.value for k in node.keywords if k.arg == "message"), None)
            )
            if message is None or (isinstance(message, ast.Constant) and isinstance(message.value, str)):
                continue
            if isinstance(message, ast.Name) and message.id.isupper():  # a module's constant, marked N_()
                continue
            built.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not built, "UserError's sentence must be a literal with {placeholders} given as keywords:\n" + "\n".join(
        built
    )


def test_an_error_reads_in_the_requested_language():
    e = UserError(404, "There is no dataset {owner}/{name} that you can see.", owner="ada", name="notes")
    assert str(e) == "There is no dataset ada/notes that you can see."
    assert e.in_locale("en") == str(e)
    zh = e.in_locale("zh_CN")
    assert "ada/notes" in zh and zh != str(e)


@pytest.mark.parametrize(
    ("cookie", "header", "locale"),
    [
        (None, None, "en"),
        (None, "zh-CN,zh;q=0.9,en;q=0.8", "zh_CN"),
        (None, "en-US,en;q=0.9,zh-CN;q=0.8", "en"),
        (None, "fr-FR,zh-TW;q=0.5", "zh_CN"),  # the first we have: Chinese, ours Simplified
        (None, "de, fr", "en"),
        (None, "en;q=0.1, zh;q=0.9", "zh_CN"),
        (None, "zh;q=0, en", "en"),
        ("en", "zh-CN", "en"),  # the switch wins
        ("zh_CN", "en", "zh_CN"),
        ("klingon", "zh-CN", "zh_CN"),  # a cookie of no language we have is ignored
        (None, ";;;q=abc,,", "en"),
    ],
)
def test_negotiation(cookie, header, locale):
    assert i18n.negotiate(cookie, header) == locale


@pytest.mark.parametrize(("lang", "locale"), [("zh_CN.UTF-8", "zh_CN"), ("en_US.UTF-8", "en"), ("C", "en"), ("", None)])
def test_a_posix_locale(lang, locale):
    assert i18n.from_tag(lang) == locale


def test_every_state_and_stop_reason_has_a_translated_word():
    from workspace import executions

    codes = executions.STATES + executions.STOP_REASONS + ("new", "starting", "stopping")
    for code in codes:
        assert code in executions.WORDS, code
        assert i18n.translate("zh_CN", executions.word(code)) != executions.word(code), code
    assert executions.word("save_failed") == "save failed" and executions.word("unheard-of") == "unheard-of"


def test_aligned_fields_are_padded_by_terminal_columns():
    # a Chinese character takes two columns: a column of them lines up with one of Latin letters
    rows = [i18n.aligned("{name:<8}|{n:>3}", name=name, n=n) for name, n in (("论文", 1), ("thesis", 22))]
    assert rows == ["论文    |  1", "thesis  | 22"]
    assert [i18n.display_width(r) for r in rows] == [12, 12]
    assert i18n.aligned("{x:*^6}", x="中") == "**中**"
    assert i18n.translate("zh_CN", "{a:>4}", a="é") == "   é"  # not in the catalogue: as written, aligned


def test_a_kept_sentence_is_said_in_each_readers_language():
    stored = i18n.kept("The build failed (exit code {code}); read its log to see which step.", code=2)
    english = i18n.said("en", stored)
    assert english == "The build failed (exit code 2); read its log to see which step."
    chinese = i18n.said("zh_CN", stored)
    assert chinese != english and "2" in chinese and re.search(r"[\u4e00-\u9fff]", chinese), chinese
    # older records (plain text), nothing, and JSON that is not ours stay as they are
    for text in ("The build failed; read its log.", None, "", '{"said": 1}', '{"other": "x"}'):
        assert i18n.said("zh_CN", text) == text
    e = UserError(503, "The base image {image} is not installed any more.", detail="internal", image="x:1")
    assert i18n.said("en", e.kept()) == "The base image x:1 is not installed any more."
