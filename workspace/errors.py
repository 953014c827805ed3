"""Errors a user sees.

JupyterHub shows an exception's `jupyterhub_message` on the spawn page and in
the progress stream instead of its technical text, which goes to the log.
"""

from tornado import web


class UserError(web.HTTPError):
    """An error with a sentence a student understands.

    `message` is shown to the user; `detail` (optional) is for the log only.
    """

    def __init__(self, status: int, message: str, detail: str | None = None):
        super().__init__(status, detail or message, reason=None)
        self.jupyterhub_message = message
        # HTTPError uses log_message for the response of API handlers
        self.message = message

    def __str__(self) -> str:
        return self.jupyterhub_message
