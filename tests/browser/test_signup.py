"""Real authentication end to end in Chromium: self sign-up with the institution's e-mail only, each
account approved by an administrator, and no sign-up under the administrator's name (WORKSPACE_AUTH=native)."""

from __future__ import annotations

import requests

from tests.browser.conftest import watch_errors
from tests.browser.test_accessibility import violations
from tests.integration.hub import ADMIN_PASSWORD

DOMAIN = "uni.example.edu"
PASSWORD = "correct-horse-battery"


def sign_up(page, hub, user: str, email: str, password: str = PASSWORD) -> str:
    """From the login page's "Sign up" link, as a new student finds it."""
    page.goto(f"{hub.url}/hub/login")
    page.click(".announcement a[href='signup']")
    page.fill("#username_input", user)
    page.fill("#email_input", email)
    page.fill("#password_input", password)
    page.fill("#password_confirmation_input", password)
    page.click("#signup_submit")
    page.wait_for_selector(".alert[role=alert]")
    return page.inner_text(".alert[role=alert]")


def change_password(page, old: str, new: str) -> tuple[str, str]:
    """On /hub/change-password: (the alert's class, its sentence)."""
    page.fill("#old_password_input", old)
    page.fill("#new_password_input", new)
    page.fill("#new_password_confirmation_input", new)
    page.click("#signup_submit")
    alert = page.wait_for_selector(".alert[role=alert]")
    kind = next(c for c in alert.get_attribute("class").split() if c.startswith("alert-"))
    return kind, alert.inner_text().strip()


def try_login(page, hub, user: str, password: str) -> str:
    page.goto(f"{hub.url}/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_load_state()
    if "/hub/login" not in page.url:  # logged in: the OAuth hops to the workspaces page
        page.wait_for_url("**/services/workspace/workspaces")
    return page.url


def test_sign_up_with_the_institution_address_and_an_administrators_approval(start_hub, chromium):
    hub = start_hub(WORKSPACE_AUTH="native", WORKSPACE_EMAIL_DOMAINS=DOMAIN)
    context = chromium.new_context()
    page = context.new_page()
    errors = watch_errors(page)
    try:
        message = sign_up(page, hub, "stu", "stu@gmail.com")
        assert "institution's e-mail address (@uni.example.edu)" in message, message
        # nobody may take the administrator's name: the account exists from the start
        message = sign_up(page, hub, hub.settings.admin_user, f"boss@{DOMAIN}")
        assert f"“{hub.settings.admin_user}” is taken" in message, message
        message = sign_up(page, hub, "stu", f"stu@cs.{DOMAIN}")
        assert "waits for an administrator's approval" in message, message

        assert "/hub/login" in try_login(page, hub, "stu", PASSWORD), "logged in before approval"
        # the shared password of `make up` is not a way in here
        assert requests.post(
            f"{hub.url}/hub/api/users/stu/tokens", timeout=30, json={"auth": {"username": "stu", "password": "x" * 12}}
        ).status_code in (401, 403)

        assert try_login(page, hub, hub.settings.admin_user, ADMIN_PASSWORD).endswith("/services/workspace/workspaces")
        page.goto(f"{hub.url}/hub/authorize")
        assert violations(page) == []
        # approving is a POST with the XSRF token: a link (GET) or a form from elsewhere changes nothing
        assert page.request.get(f"{hub.url}/hub/authorize/stu", max_redirects=0).status == 405
        assert page.request.post(f"{hub.url}/hub/discard/stu", max_redirects=0).status == 403
        assert page.request.post(f"{hub.url}/hub/authorize/nobody", max_redirects=0).status == 403
        page.reload()
        assert page.get_attribute("#account-stu", "data-approved") == "false"
        page.click("#account-stu button.approve")
        page.wait_for_selector("#account-stu[data-approved=true]")
        # an administrator sets a password for a user on the same page as a user's own, without the current one
        page.goto(f"{hub.url}/hub/change-password/stu")
        assert not page.is_visible("#old_password_input")
        page.fill("#new_password_input", "a" * 4)
        page.fill("#new_password_confirmation_input", "a" * 4)
        page.click("#signup_submit")
        assert page.get_attribute(".alert[role=alert]", "class").split()[-1] == "alert-danger"
        assert violations(page) == []
        page.goto(f"{hub.url}/hub/logout")
        context.clear_cookies()

        assert try_login(page, hub, "stu", PASSWORD).endswith("/services/workspace/workspaces")
        # NativeAuthenticator's pages stay in the shared navigation
        assert page.is_visible("a.nav-link[href$='/hub/change-password']")
        page.click("a.nav-link[href$='/hub/change-password']")
        assert change_password(page, "not-my-password", "new-horse-battery") == (
            "alert-danger",
            "Your current password is not the one you typed; try again.",
        )
        assert change_password(page, PASSWORD, "short")[0] == "alert-danger"
        assert change_password(page, PASSWORD, "new-horse-battery") == ("alert-success", "Your password is changed.")
        assert violations(page) == []
        page.goto(f"{hub.url}/hub/logout")
        assert try_login(page, hub, "stu", "new-horse-battery").endswith("/services/workspace/workspaces")
        # console errors from the sign-up page's own refusals are the expected 4xx pages only
        assert not [e for e in errors if "Failed to load resource" not in e], errors
    finally:
        page.close()
        context.close()


def test_sign_up_in_chinese(start_hub, chromium):
    hub = start_hub(WORKSPACE_AUTH="native", WORKSPACE_EMAIL_DOMAINS=DOMAIN)
    context = chromium.new_context(locale="zh-CN")
    page = context.new_page()
    try:
        message = sign_up(page, hub, "xue", "xue@gmail.com")
        assert "@uni.example.edu" in message and "xue@gmail.com" in message and "institution" not in message, message
        assert page.inner_text("h1") == "注册", page.inner_text("h1")
        assert page.get_attribute("#eye", "aria-label") == "显示密码"
        page.click("#eye")  # both password fields shown, and the button says it hides them now
        assert page.get_attribute("#eye", "aria-label") == "隐藏密码"
        types = page.eval_on_selector_all("input[name^=signup_password]", "fs => fs.map(f => f.type)")
        assert types == ["text", "text"], types
        assert violations(page) == []
        message = sign_up(page, hub, "xue", f"xue@{DOMAIN}", password="a")
        assert "a" != message and "10" in message and "password" not in message, message
        message = sign_up(page, hub, "xue", f"xue@{DOMAIN}")
        assert "管理员" in message, message  # waits for an administrator
    finally:
        context.close()
