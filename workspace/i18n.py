"""The languages workspace speaks: English and Chinese (Simplified).

Every sentence a user reads is a message in a catalogue, in one of three forms:

- in Python, an error's sentence (`UserError(status, "... {name} ...", name=...)`, Babel's keyword
  `UserError:2`), or a message marked `_("...")` / `N_("...")`;
- in templates, `{% trans %}...{% endtrans %}` or `_("...")` (jinja2's i18n extension);
- in the pages' JavaScript, `_("...")` (workspace/service/static/i18n.js looks it up).

Babel extracts them (babel.cfg; `make messages` updates workspace/locale/workspace.pot and each
locale's .po); a translator fills workspace/locale/<locale>/LC_MESSAGES/workspace.po. The .po is read
and compiled in memory when first needed: no binary in the repository, no build step. A message a
catalogue lacks shows in English, and tests/unit/test_i18n.py fails on it.

A message's placeholders are named (`{name}`), never positional and never formatted before the lookup:
the translation may put them in another order.
"""

from __future__ import annotations

import functools
import gettext
import io
import json
import re
import string
import unicodedata
from pathlib import Path

from jinja2 import pass_context
from jinja2.ext import InternationalizationExtension

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "workspace"
DEFAULT = "en"
# the languages offered, each named in itself (as the switch shows it)
LOCALES = {"en": "English", "zh_CN": "中文"}
# the browser's language tag of each (the `lang` of a page, the Accept-Language sent on)
TAGS = {"en": "en", "zh_CN": "zh-CN"}
# the choice a user made with the header's switch; read by the hub's pages and the service's alike
COOKIE = "workspace-lang"
KEPT = "said"  # the key of a stored sentence's message (`kept`)


def N_(message: str) -> str:
    """Marks a message for the catalogue where it is defined; it is translated where it is shown."""
    return message


@functools.cache
def _catalog(locale: str):
    """The translators' catalogue of `locale` (a Babel Catalog), read once; None for English or a locale we
    do not have (never a path built from anything else)."""
    if locale not in LOCALES or locale == DEFAULT:
        return None
    from babel.messages.pofile import read_po

    with (LOCALE_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po").open("rb") as f:
        return read_po(f, locale=locale)


@functools.cache
def translations(locale: str) -> gettext.NullTranslations:
    """The catalogue of `locale` (English: the messages as written)."""
    catalog = _catalog(locale)
    if catalog is None:
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo

    buf = io.BytesIO()
    write_mo(buf, catalog, use_fuzzy=False)
    buf.seek(0)
    return gettext.GNUTranslations(buf)


@functools.cache
def js_messages(locale: str) -> dict[str, str]:
    """{message: translation} of the messages the pages' JavaScript says (static/i18n.js reads them)."""
    catalog = _catalog(locale)
    if catalog is None:
        return {}
    return {
        m.id: m.string
        for m in catalog
        if m.id
        and isinstance(m.id, str)
        and m.string
        and not m.fuzzy
        and any(file.endswith(".js") for file, _ in m.locations)
    }


def display_width(text: str) -> int:
    """The columns `text` takes on a terminal: a wide character (Chinese) two, a combining mark none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1 for c in text
    )


class _ColumnFormatter(string.Formatter):
    """str.format, but a string aligned in a field (`{name:<24}`, the CLI's tables) is padded to the field's
    width in terminal columns, not in characters: a column of Chinese names lines up."""

    ALIGNED = re.compile(r"(?P<fill>.?)(?P<align>[<>^])(?P<width>\d+)")

    def format_field(self, value, format_spec):
        m = self.ALIGNED.fullmatch(format_spec)
        if not isinstance(value, str) or m is None:
            return super().format_field(value, format_spec)
        fill, align = m["fill"] or " ", m["align"]
        pad = max(0, int(m["width"]) - display_width(value))
        left = {"<": 0, ">": pad, "^": pad // 2}[align]
        return fill * left + value + fill * (pad - left)


_columns = _ColumnFormatter()


def aligned(template: str, /, **params) -> str:
    """`template.format(**params)` with its aligned fields padded by terminal columns (not translated)."""
    return _columns.format(template, **params)


def translate(locale: str, message: str, /, **params) -> str:
    """`message` in `locale`, its `{placeholders}` filled from `params` (aligned ones by terminal columns)."""
    text = translations(locale).gettext(message)
    if not params:
        return text
    try:
        return _columns.format(text, **params)
    except (KeyError, IndexError, ValueError):  # a broken translation: the sentence as written
        return _columns.format(message, **params)


def kept(message: str, /, **params) -> str:
    """A sentence to store and say later in each reader's language (`said`): a catalogue message (a literal
    with `{placeholders}`: Babel's keyword `kept`) with its values (JSON's), as JSON."""
    return json.dumps({KEPT: message, "params": params}, ensure_ascii=False)


def said(locale: str, stored: str | None) -> str | None:
    """A stored sentence in `locale`: one made by `kept()` translated, any other text (records written
    before sentences were kept this way) as it is."""
    if not stored or not stored.startswith('{"' + KEPT + '":'):
        return stored
    try:
        data = json.loads(stored)
        return translate(locale, data[KEPT], **data["params"])
    except (ValueError, KeyError, TypeError):
        return stored


def _ranked(accept_language: str) -> list[str]:
    """An Accept-Language header's tags, most wanted first."""
    tags = []
    for i, part in enumerate(accept_language.split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if tag and q > 0:
            tags.append((-q, i, tag.strip().lower()))
    return [tag for *_, tag in sorted(tags)]


def from_tag(tag: str | None) -> str | None:
    """The locale a language tag (or a POSIX locale such as zh_CN.UTF-8) asks for, None if none we have."""
    tag = (tag or "").strip().lower().replace("_", "-").split(".")[0]
    if tag.startswith("zh"):  # Chinese in any script or region: ours is Simplified, closer than English
        return "zh_CN"
    if tag.startswith("en") or tag in ("*", "c", "posix"):
        return "en"
    return None


def negotiate(chosen: str | None, accept_language: str | None) -> str:
    """The locale for a request: the user's choice (the switch's cookie) if it is one we have, else the
    first of the browser's languages we have, else English."""
    if chosen in LOCALES:
        return chosen
    for tag in _ranked(accept_language or ""):
        locale = from_tag(tag)
        if locale:
            return locale
    return DEFAULT


def of_request(request) -> str:
    """The locale of a tornado request (the hub's or the service's: the cookie is on their shared origin)."""
    cookie = request.cookies.get(COOKIE)
    return negotiate(cookie.value if cookie else None, request.headers.get("Accept-Language"))


def _context_locale(context) -> str:
    """The locale of the page a template renders: its `locale` (the service's pages set it), else that
    of the request of the hub's handler rendering it (the hub's pages: its namespace carries the
    handler's bound `static_url`, the one way in to its request)."""
    locale = context.get("locale")
    if locale in LOCALES:
        return locale
    handler = getattr(context.get("static_url"), "__self__", None)
    request = getattr(handler, "request", None)
    return of_request(request) if request is not None else DEFAULT


@pass_context
def _gettext(context, message: str) -> str:
    return translations(_context_locale(context)).gettext(message)


@pass_context
def _ngettext(context, singular: str, plural: str, n: int) -> str:
    return translations(_context_locale(context)).ngettext(singular, plural, n)


@pass_context
def _page_locale(context) -> str:
    return _context_locale(context)


class Jinja(InternationalizationExtension):
    """jinja2's i18n extension with these catalogues, for the hub's pages (`jinja_environment_options`:
    "workspace.i18n.Jinja") and the service's: `{% trans %}`, `_()` (placeholders `%(name)s`, jinja's
    way), and `page_locale()`, `LOCALES`, `TAGS`, `LANG_COOKIE` for the language switch."""

    def __init__(self, environment):
        super().__init__(environment)
        environment.install_gettext_callables(_gettext, _ngettext, newstyle=True)
        environment.globals.update(page_locale=_page_locale, LOCALES=LOCALES, TAGS=TAGS, LANG_COOKIE=COOKIE)
