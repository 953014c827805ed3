"""The manual (docs/): its build in every language, and its Chinese kept in step with its English (#35).

    python -m workspace.setup.manual build          # docs/_build/html/<locale>/, then `check`  (make docs;
                                                    # make up builds with --no-check, and goes on without it)
    python -m workspace.setup.manual translations   # the guides' catalogues brought up to date (make translations)
    python -m workspace.setup.manual check          # every sentence of the guides translated, none stale

The guides for students and instructors (TRANSLATED) are in English and Chinese through Sphinx's gettext
workflow: their sentences are extracted (`sphinx-build -b gettext`) into catalogues under
docs/locales/zh_CN/LC_MESSAGES/, one a page, which sphinx-intl keeps up to date; a translator fills in
`msgstr`. When an English sentence changes, its old translation becomes "fuzzy" and is not used: the
Chinese page shows the new English sentence, and `check` (run by every build, so by `make test`)
fails naming it, rather than a stale translation going unnoticed. The other pages (administrators,
reference, contributors) are English in both builds.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from babel.messages.pofile import read_po

from workspace import i18n

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
OUT = DOCS / "_build" / "html"
LOCALES_DIR = DOCS / "locales"
TRANSLATED = ("index", "students/", "instructors/")  # the pages (a name, or a folder's) in every language
SPHINX = [sys.executable, "-m", "sphinx", "-q", "-n", "-W", "--keep-going"]


def _translated(page: str) -> bool:
    return any(page == t or (t.endswith("/") and page.startswith(t)) for t in TRANSLATED)


def build() -> None:
    """Every language's site into OUT/<locale>/ (warnings are errors: a broken link fails it)."""
    for locale in i18n.LOCALES:
        subprocess.run([*SPHINX, "-b", "html", "-D", f"language={locale}", str(DOCS), str(OUT / locale)], check=True)


def templates(into: Path) -> dict[str, Path]:
    """The guides' message templates (.pot), extracted from their English now: page -> file."""
    subprocess.run([*SPHINX, "-b", "gettext", str(DOCS), str(into)], check=True)
    pots = {str(p.relative_to(into).with_suffix("")): p for p in into.rglob("*.pot")}
    return {page: pot for page, pot in pots.items() if _translated(page)}


def translations(locale: str = "zh_CN") -> None:
    """Bring the guides' catalogues of `locale` up to date with their English (new sentences empty,
    changed ones fuzzy); a translator then fills them in."""
    with tempfile.TemporaryDirectory() as tmp:
        pots = templates(Path(tmp))
        for pot in Path(tmp).rglob("*.pot"):
            if pot not in pots.values():
                pot.unlink()  # (administrators' and reference pages stay English)
        subprocess.run(
            [sys.executable, "-m", "sphinx_intl", "update", "-p", tmp, "-d", str(LOCALES_DIR), "-l", locale, "-w", "0"],
            check=True,
            stdout=subprocess.DEVNULL,
        )


def untranslated(locale: str = "zh_CN") -> dict[str, list[str]]:
    """page -> its English sentences with no (or only a fuzzy) translation in `locale`."""
    missing: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for page, pot in sorted(templates(Path(tmp)).items()):
            po_path = LOCALES_DIR / locale / "LC_MESSAGES" / f"{page}.po"
            done = {}
            if po_path.exists():
                with po_path.open("rb") as f:
                    done = {m.id: m for m in read_po(f) if m.id}
            with pot.open("rb") as f:
                wanted = [m.id for m in read_po(f) if m.id]
            lacking = [w for w in wanted if w not in done or not done[w].string or done[w].fuzzy]
            if lacking:
                missing[page] = lacking
    return missing


def check(locale: str = "zh_CN") -> bool:
    missing = untranslated(locale)
    for page, sentences in missing.items():
        print(f"docs/{page}.md: {len(sentences)} sentence(s) without a {locale} translation, like:")
        for s in sentences[:3]:
            print(f"    {s[:100]!r}")
    if missing:
        print(
            f"error: the guides' {locale} translation is behind their English: run `make translations`, "
            f"fill in the msgstr of the catalogues under docs/locales/{locale}/LC_MESSAGES/, then `make docs`"
        )
    return not missing


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m workspace.setup.manual", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=("build", "translations", "check"))
    p.add_argument("--no-check", action="store_true", help="build without checking the translations (make up)")
    args = p.parse_args(argv)
    try:
        if args.command == "build":
            build()
        if args.command == "translations":
            translations()
        elif not args.no_check and not check():
            sys.exit(1)
    except subprocess.CalledProcessError:
        sys.exit("error: the documentation site has the warnings above; fix them, then run `make docs` again")


if __name__ == "__main__":
    main()
