"""The header's language switch: /services/workspace/language/<locale> remembers the choice in a cookie on
the hub's origin (so the hub's pages and the service's read it alike) and goes back to the page it was
chosen on. Anyone may choose a language: the cookie is a preference, no credential."""

from __future__ import annotations

from urllib.parse import urlsplit

from tornado import web

from workspace import i18n
from workspace.errors import UserError

YEAR = 365


class LanguageHandler(web.RequestHandler):
    def initialize(self, prefix: str):
        self.prefix = prefix

    def get(self, locale: str):
        if locale not in i18n.LOCALES:
            choices = ", ".join(i18n.LOCALES)
            raise UserError(
                404, "There is no language {locale} here; choose one of {choices}.", locale=locale, choices=choices
            )
        self.set_cookie(i18n.COOKIE, locale, path="/", expires_days=YEAR, samesite="Lax")
        self.redirect(self.back())

    def back(self) -> str:
        """The page the switch was used on (by the Referer), if it is a page of this origin; else the
        workspaces. Never another site: the switch is no open redirect."""
        referer = urlsplit(self.request.headers.get("Referer", ""))
        same_origin = referer.netloc == self.request.host and referer.scheme in ("http", "https")
        path = referer.path if same_origin else ""
        if not path.startswith("/") or path.startswith("//") or "\\" in path:
            return f"{self.prefix}workspaces"
        return path + (f"?{referer.query}" if referer.query else "")

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        locale = i18n.of_request(self.request)
        message = exc.in_locale(locale) if isinstance(exc, UserError) else self._reason
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(message)


def handlers(prefix: str) -> list:
    return [(rf"{prefix}language/([^/]+)", LanguageHandler, {"prefix": prefix})]
