"""The message catalogues: extract every message from the code, and bring each locale's .po up to date.

    python -m workspace.setup.messages      (make messages)

writes workspace/locale/workspace.pot (what the code says) and adds each new message to
workspace/locale/<locale>/LC_MESSAGES/workspace.po, untranslated, for a translator (messages the code no
longer says are dropped; a translation is never lost for a message still said). Babel does the work:
extraction by babel.cfg's methods with the keywords below, the .po files read and written by it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po, write_po

from workspace import i18n

ROOT = Path(__file__).resolve().parents[2]
POT = i18n.LOCALE_DIR / f"{i18n.DOMAIN}.pot"
# Babel's defaults (_, gettext, ngettext, N_, ...) and ours: an error's sentence is UserError's second
# argument; i18n.translate's too
KEYWORDS = {
    "_": None,
    "gettext": None,
    "ngettext": (1, 2),
    "N_": None,
    "UserError": (2,),
    "translate": (2,),
    "localized": None,
    "kept": None,
}


def extract() -> Catalog:
    """Every message the code says, with where (babel.cfg)."""
    with (ROOT / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f)
    catalog = Catalog(project="workspace", domain=i18n.DOMAIN)
    for filename, lineno, message, comments, context in extract_from_dir(
        str(ROOT), method_map, options_map, KEYWORDS, strip_comment_tags=True
    ):
        catalog.add(message, None, [(filename, lineno)], auto_comments=comments, context=context)
    return catalog


def po_path(locale: str) -> Path:
    return i18n.LOCALE_DIR / locale / "LC_MESSAGES" / f"{i18n.DOMAIN}.po"


def read(locale: str) -> Catalog:
    with po_path(locale).open("rb") as f:
        return read_po(f, locale=locale)


def missing(locale: str, template: Catalog | None = None) -> list[str]:
    """The messages the code says that `locale`'s catalogue does not translate (or only as fuzzy)."""
    template = template or extract()
    catalog = read(locale)
    out = []
    for message in template:
        if not message.id:
            continue
        found = catalog.get(message.id, context=message.context)
        strings = (found.string if isinstance(found.string, (list, tuple)) else [found.string]) if found else []
        if not found or found.fuzzy or not all(strings):
            out.append(message.id if isinstance(message.id, str) else message.id[0])
    return out


def update() -> dict[str, int]:
    """Write the .pot and bring every locale's .po up to date; {locale: messages left to translate}."""
    template = extract()
    i18n.LOCALE_DIR.mkdir(parents=True, exist_ok=True)
    with POT.open("wb") as f:
        write_po(f, template, omit_header=True, sort_output=True, width=120)
    left = {}
    for locale in i18n.LOCALES:
        if locale == i18n.DEFAULT:
            continue
        path = po_path(locale)
        path.parent.mkdir(parents=True, exist_ok=True)
        catalog = read(locale) if path.exists() else Catalog(locale=locale, domain=i18n.DOMAIN, project="workspace")
        catalog.update(template, no_fuzzy_matching=True)
        catalog.obsolete.clear()
        with path.open("wb") as f:
            write_po(f, catalog, sort_output=True, width=120, ignore_obsolete=True)
        left[locale] = len(missing(locale, template))
    return left


def listed(files: list[str]) -> dict[str, str]:
    """{message: its zh_CN translation so far, or ""} of the messages `files` say (paths from the root)."""
    template = extract()
    wanted = {str(Path(f)) for f in files}
    zh = read("zh_CN") if po_path("zh_CN").exists() else None
    out = {}
    for m in template:
        if m.id and any(loc in wanted for loc, _ in m.locations):
            found = zh.get(m.id) if zh else None
            out[m.id if isinstance(m.id, str) else m.id[0]] = (found.string if found and not found.fuzzy else "") or ""
    return out


def merge(parts: list[Path], locale: str = "zh_CN") -> tuple[int, list[str]]:
    """Fill `locale`'s .po from translators' JSON files ({message: translation}); (messages filled, the
    parts' messages the code no longer says)."""
    import json

    update()
    catalog = read(locale)
    filled, unknown = 0, []
    for part in parts:
        for msgid, text in json.loads(Path(part).read_text()).items():
            message = catalog.get(msgid)
            if message is None:
                unknown.append(msgid)
            elif text and (not all(message.string if message.pluralizable else [message.string]) or message.fuzzy):
                # a plural message: the one translation for each of the language's forms (Chinese has one)
                message.string = (text,) * catalog.num_plurals if message.pluralizable else text
                message.flags = set(message.flags) - {"fuzzy"}
                filled += 1
    with po_path(locale).open("wb") as f:
        write_po(f, catalog, sort_output=True, width=120, ignore_obsolete=True)
    return filled, unknown


if __name__ == "__main__":
    if sys.argv[1:2] == ["--merge"]:  # translators' JSON parts into the zh_CN catalogue
        n, unknown = merge([Path(p) for p in sys.argv[2:]])
        print(f"[messages] {n} translation(s) filled; {len(unknown)} of the parts' messages are not in the code")
        for msgid in unknown:
            print(f"  not in the code: {msgid!r}")
        sys.exit(0)
    if sys.argv[1:2] == ["--list"]:  # what a translator of these files has to do, as JSON
        import json

        print(json.dumps(listed(sys.argv[2:]), ensure_ascii=False, indent=1))
        sys.exit(0)
    for locale, n in update().items():
        print(f"[messages] {po_path(locale).relative_to(ROOT)}: {n} message(s) to translate")
    sys.exit(0)
