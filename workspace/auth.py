"""Logging in for real: self sign-up with an institution's e-mail address, every account approved.

    WORKSPACE_AUTH=native WORKSPACE_EMAIL_DOMAINS=uni.example.edu make up

`InstitutionAuthenticator` is JupyterHub's NativeAuthenticator (password
hashes with bcrypt, login throttling, common-password check) with three
rules a campus needs:

- sign-up asks for an e-mail address and accepts only the institution's
  domains (`email_domains`; a subdomain counts), with a sentence for anyone
  else;
- every new account waits until an administrator approves it on
  /hub/authorize (no open sign-up);
- the administrator's account exists from the first start, with the
  deployment's admin password: nobody can sign up under the admin's name
  before the admin does (NativeAuthenticator would approve such a sign-up
  at once, since the name is an admin's).
"""

from __future__ import annotations

import bcrypt
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.handlers import SignUpHandler
from nativeauthenticator.orm import UserInfo
from traitlets import List, Unicode, default


def domain_of(email: str) -> str:
    return email.rsplit("@", 1)[-1].strip().lower() if "@" in (email or "") else ""


def email_allowed(email: str, domains) -> bool:
    """Whether an address is of one of the domains (or a subdomain of one)."""
    domain = domain_of(email)
    return bool(domain) and any(domain == d.lower() or domain.endswith("." + d.lower()) for d in domains)


class InstitutionSignUpHandler(SignUpHandler):
    """The sign-up page, saying why an address outside the institution is refused."""

    async def post(self):
        self._email = self.get_body_argument("email", "", strip=True)
        return await super().post()

    def get_result_message(self, user, *args, **kwargs):
        authenticator = self.authenticator
        if user is None and not authenticator.email_allowed(getattr(self, "_email", "")):
            domains = ", ".join(f"@{d}" for d in authenticator.email_domains)
            return (
                "alert-danger",
                f"Sign up with your institution's e-mail address ({domains}); “{self._email}” is not one.",
            )
        alert, message = super().get_result_message(user, *args, **kwargs)
        if user is not None and alert == "alert-info":
            message = (
                "Your account was created and waits for an administrator's approval; you can log in "
                "once it is approved."
            )
        return alert, message


class InstitutionAuthenticator(NativeAuthenticator):
    email_domains = List(
        Unicode(),
        config=True,
        help="""E-mail domains whose addresses may sign up (WORKSPACE_EMAIL_DOMAINS,
        comma-separated), e.g. ["uni.example.edu"]; a subdomain of one counts.
        Empty: nobody may sign up (accounts come from an administrator).""",
    )
    admin_password = Unicode(
        config=True,
        help="""The administrator's password (WORKSPACE_ADMIN_PASSWORD): the
        admin's account is made with it at the first start, so nobody can sign
        up under the admin's name first.""",
    )

    @default("ask_email_on_signup")
    def _default_ask_email(self):
        return True

    @default("open_signup")
    def _default_open_signup(self):
        return False

    @default("minimum_password_length")
    def _default_minimum_password_length(self):
        return 10

    @default("allowed_failed_logins")
    def _default_allowed_failed_logins(self):
        return 5

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._seed_admins()

    def _seed_admins(self) -> None:
        if not self.admin_password:
            return
        for name in self.admin_users:
            if UserInfo.find(self.db, name) is None:
                hashed = bcrypt.hashpw(self.admin_password.encode(), bcrypt.gensalt())
                self.db.add(UserInfo(username=name, password=hashed, is_authorized=True))
                self.db.commit()
                self.log.info("Made the administrator account %s (with the deployment's admin password)", name)

    def email_allowed(self, email: str) -> bool:
        return email_allowed(email, self.email_domains)

    def create_user(self, username, password, **kwargs):
        if not self.email_allowed(kwargs.get("email", "")):
            return None
        return super().create_user(username, password, **kwargs)

    def get_handlers(self, app):
        # JupyterHub's own login page and handler stay (NativeAuthenticator 1.3's
        # LoginHandler reads `statsd`, which JupyterHub 6 no longer has); its
        # sign-up page is this one, saying why an address is refused
        return [
            (path, InstitutionSignUpHandler if handler is SignUpHandler else handler)
            for path, handler in super().get_handlers(app)
            if path != r"/login"
        ]
