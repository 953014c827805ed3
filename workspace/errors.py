"""Errors a user sees.

JupyterHub shows an exception's `jupyterhub_message` on the spawn page and in
the progress stream instead of its technical text, which goes to the log.
"""

from tornado import web

from workspace import i18n


class UserError(web.HTTPError):
    """An error with a sentence a student understands, in their language.

    `message` is the sentence as written (English), with named `{placeholders}` filled from `params`:
    the catalogue (workspace/i18n.py; Babel's keyword `UserError:2` extracts it) is looked up with the
    sentence before it is filled, so write it as a literal, never an f-string (tests/unit/test_i18n.py
    checks). `detail` (optional) is for the log only.
    """

    def __init__(self, status: int, message: str, /, detail: str | None = None, **params):
        self.template, self.params = message, params
        text = message.format(**params) if params else message
        super().__init__(status, detail or text, reason=None)
        self.jupyterhub_message = text
        # HTTPError uses log_message for the response of API handlers
        self.message = text

    def in_locale(self, locale: str) -> str:
        """The sentence in `locale`."""
        return i18n.translate(locale, self.template, **self.params)

    def __str__(self) -> str:
        return self.jupyterhub_message

    def kept(self) -> str:
        """The sentence to store, said later in each reader's language (`i18n.said`)."""
        return i18n.kept(self.template, **self.params)


# what a user reads of a fault that is not theirs (the details go to the log)
SERVER_FAULT = i18n.N_("Something went wrong on the server; the administrators can find the details in its log.")


def sentence_of(exc: web.HTTPError) -> str | None:
    """The sentence an HTTP error carries for its user (as written), None if it carries none."""
    return getattr(exc, "jupyterhub_message", None) or exc.log_message or None


def sentence(exc: BaseException | None, locale: str) -> str:
    """What a user reads of `exc`, in `locale`."""
    if isinstance(exc, UserError):
        return exc.in_locale(locale)
    if isinstance(exc, web.HTTPError) and sentence_of(exc):
        return sentence_of(exc)
    return i18n.translate(locale, SERVER_FAULT)
