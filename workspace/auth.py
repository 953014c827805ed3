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
from nativeauthenticator.handlers import (
    ChangePasswordAdminHandler,
    ChangePasswordHandler,
    DiscardHandler,
    SignUpHandler,
    ToggleAuthorizationHandler,
    admin_users_scope,
)
from nativeauthenticator.orm import UserInfo
from tornado import web
from traitlets import List, Unicode, default

from workspace import i18n


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
        self._username = self.get_body_argument("username", "", strip=False)
        return await super().post()

    def get_result_message(self, user, human, name_taken, confirmation_matches, is_admin):
        """The sentence after a try (NativeAuthenticator's handler asks), in the reader's language."""
        authenticator, locale = self.authenticator, i18n.of_request(self.request)

        if not human:
            return "alert-danger", i18n.translate(locale, "The reCAPTCHA did not pass; try again.")
        if name_taken:
            return "alert-danger", i18n.translate(
                locale, "The username “{name}” is taken; choose another.", name=self._username
            )
        if not confirmation_matches:
            return "alert-danger", i18n.translate(locale, "The two passwords differ; type the same password twice.")
        if user is None and not authenticator.email_allowed(self._email):
            domains = ", ".join(f"@{d}" for d in authenticator.email_domains)
            return "alert-danger", i18n.translate(
                locale,
                "Sign up with your institution's e-mail address ({domains}); “{email}” is not one.",
                domains=domains,
                email=self._email,
            )
        if user is None:
            return "alert-danger", i18n.translate(
                locale,
                "The account was not created: a username has no spaces, commas or slashes, and a password has "
                "at least {length} characters and is not a common one.",
                length=authenticator.minimum_password_length,
            )
        if authenticator.open_signup or is_admin:
            return "alert-success", i18n.translate(locale, "Your account is ready: sign in with it.")
        return "alert-info", i18n.translate(
            locale,
            "Your account was created and waits for an administrator's approval; you can log in once it is approved.",
        )


class InstitutionChangePasswordHandler(ChangePasswordHandler):
    """/hub/change-password: a user changes their own password, told what happened in their language."""

    @web.authenticated
    async def post(self):
        user = await self.get_current_user()
        old = self.get_body_argument("old_password", strip=False)
        new = self.get_body_argument("new_password", strip=False)
        locale = i18n.of_request(self.request)
        alert = "alert-danger"
        if not self.authenticator.get_user(user.name).is_valid_password(old):
            message = i18n.translate(locale, "Your current password is not the one you typed; try again.")
        elif new != self.get_body_argument("new_password_confirmation", strip=False):
            message = i18n.translate(locale, "The two new passwords differ; type the same password twice.")
        elif not self.authenticator.change_password(user.name, new):
            message = i18n.translate(
                locale,
                "The password was not changed: a password has at least {length} characters and is not a common one.",
                length=self.authenticator.minimum_password_length,
            )
        else:
            alert, message = "alert-success", i18n.translate(locale, "Your password is changed.")
        self.finish(
            await self.render_template("change-password.html", user_name=user.name, result_message=message, alert=alert)
        )


class InstitutionChangePasswordAdminHandler(ChangePasswordAdminHandler):
    """/hub/change-password/NAME: an administrator sets a user's password (the same page as a user's own,
    without the current password), told what happened in their language."""

    @admin_users_scope
    async def get(self, user_name):
        if not self.authenticator.user_exists(user_name):
            raise web.HTTPError(404)
        self.finish(await self.render_template("change-password.html", user_name=user_name, for_admin=True))

    @admin_users_scope
    async def post(self, user_name):
        if not self.authenticator.user_exists(user_name):
            raise web.HTTPError(404)
        new = self.get_body_argument("new_password", strip=False)
        locale = i18n.of_request(self.request)
        alert = "alert-danger"
        if new != self.get_body_argument("new_password_confirmation", strip=False):
            message = i18n.translate(locale, "The two new passwords differ; type the same password twice.")
        elif not self.authenticator.change_password(user_name, new):
            message = i18n.translate(
                locale,
                "The password was not changed: a password has at least {length} characters and is not a common one.",
                length=self.authenticator.minimum_password_length,
            )
        else:
            alert = "alert-success"
            message = i18n.translate(locale, "The password of {name} is changed.", name=user_name)
        self.finish(
            await self.render_template(
                "change-password.html", user_name=user_name, for_admin=True, result_message=message, alert=alert
            )
        )


class _ChangedByPost:
    """An administrator's change of an account (approve, withdraw, discard) by POST from the /hub/authorize
    page's forms, which carry the XSRF token. NativeAuthenticator makes these changes on GET: any link an
    administrator followed (a page elsewhere, a notebook's output) could approve an account."""

    @admin_users_scope
    async def get(self, user_name):
        raise web.HTTPError(
            405,
            i18n.translate(
                i18n.of_request(self.request), "Approve or discard accounts with the buttons on /hub/authorize."
            ),
        )

    def _pending_user(self, user_name: str):
        info = self.authenticator.get_user(user_name)
        if info is None:
            raise web.HTTPError(404, i18n.translate(i18n.of_request(self.request), "There is no such account."))
        return info


class InstitutionToggleAuthorizationHandler(_ChangedByPost, ToggleAuthorizationHandler):
    """POST /hub/authorize/NAME: approve an account that waits, or withdraw an approval."""

    @admin_users_scope
    async def post(self, user_name):
        self._pending_user(user_name)
        UserInfo.change_authorization(self.db, user_name)
        self.redirect(self.hub.base_url + "authorize")


class InstitutionDiscardHandler(_ChangedByPost, DiscardHandler):
    """POST /hub/discard/NAME: delete an account that was never approved."""

    @admin_users_scope
    async def post(self, user_name):
        if not self._pending_user(user_name).is_authorized:
            self.authenticator.delete_user(type("User", (), {"name": user_name}))
            if self.users.get(user_name) is not None:
                self.users.delete(user_name)
        self.redirect(self.hub.base_url + "authorize")


# NativeAuthenticator's handlers this authenticator replaces (their pages: workspace/hub_templates/)
OURS = {
    SignUpHandler: InstitutionSignUpHandler,
    ChangePasswordHandler: InstitutionChangePasswordHandler,
    ChangePasswordAdminHandler: InstitutionChangePasswordAdminHandler,
    ToggleAuthorizationHandler: InstitutionToggleAuthorizationHandler,
    DiscardHandler: InstitutionDiscardHandler,
}


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
        return [(path, OURS.get(handler, handler)) for path, handler in super().get_handlers(app) if path != r"/login"]
