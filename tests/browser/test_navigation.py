"""One place to work: login lands on the workspaces, and the hub's pages and the service's share one header.

A student never needs to know which process serves a page: the same navigation items (in the same
order, to the same addresses), the same logo at the same size and the same light/dark toggle on the
hub's home, token and spawn pages as on the service's. The hub's spawn form and the service's start
form are one form: the same fields, choices and defaults.
"""

from __future__ import annotations

import json

from tests.browser.conftest import login, watch_errors
from tests.integration.hub import ADMIN_PASSWORD, USER_PASSWORD

NAV = "#thenavbar .navbar-nav:first-child a.nav-link"


def header(page) -> dict:
    """What a user sees of the header: the navigation's (label, address)es, the logo's size, the toggle."""
    logo = page.locator("#jupyterhub-logo img").bounding_box()
    return {
        "nav": page.eval_on_selector_all(NAV, "as => as.map(a => [a.innerText.trim(), a.pathname])"),
        "logo": (round(logo["width"]), round(logo["height"])),
        "toggle": page.locator("#dark-theme-toggle").count(),
        "logout": page.locator("#logout").count(),
    }


FORM_FIELDS = """form => [...form.querySelectorAll('[name]')]
  .filter(e => ['continue_from', 'datasets', 'resource_type', 'image', 'cleanup'].includes(e.name))
  .map(e => [e.name, e.tagName, e.type, e.value, e.checked || false,
             [...(e.options || e.list?.options || [])].map(o => [o.value, o.text, o.selected])])"""


def test_login_lands_on_workspaces_and_every_page_shares_the_header(start_hub, chromium):
    hub = start_hub(
        WORKSPACE_RESOURCE_TYPES=json.dumps(
            [{"name": "small", "cpu": 1, "memory": "1G"}, {"name": "large", "cpu": 2, "memory": "2G"}]
        ),
        WORKSPACE_DEFAULT_RESOURCE_TYPE="large",
    )
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        login(page, hub, "ivy", USER_PASSWORD)  # waits for the workspaces page
        ours = header(page)
        labels = [label for label, _ in ours["nav"]]
        assert labels[:7] == ["Workspaces", "Datasets", "Images", "Deployments", "Labelling", "Storage", "SSH"], labels
        assert "Admin" not in labels and "Course" not in labels, labels
        assert labels[-1] == "Help" and ours["nav"][-1][1] == "/services/workspace/docs/", ours["nav"]  # the manual
        assert ours["toggle"] == 1 and ours["logout"] == 1
        active = page.locator(f"{NAV}.active")
        assert active.inner_text() == "Workspaces" and active.get_attribute("aria-current") == "page"

        for path in ("/hub/token", "/hub/home", "/hub/spawn/ivy/new"):
            page.goto(f"{hub.url}{path}")
            assert header(page) == ours, path

        # the theme chosen on one page is the theme of the others
        page.goto(f"{hub.url}/hub/token")
        before = page.locator("html").get_attribute("data-bs-theme")
        page.click("#dark-theme-toggle")
        chosen = page.locator("html").get_attribute("data-bs-theme")
        assert chosen != before
        page.goto(f"{hub.url}/services/workspace/datasets")
        assert page.locator("html").get_attribute("data-bs-theme") == chosen
        assert page.locator(f"{NAV}.active").inner_text() == "Datasets"

        # one start form: the hub's spawn page and "New workspace" offer the same, with the same defaults
        page.goto(f"{hub.url}/hub/spawn/ivy/new")
        hubs = page.eval_on_selector("#spawn_form", FORM_FIELDS)
        page.goto(f"{hub.url}/services/workspace/workspaces")
        pages = page.eval_on_selector("#new-workspace", FORM_FIELDS)
        assert hubs == pages, (hubs, pages)
        chosen_type = next(f for f in pages if f[0] == "resource_type")
        assert chosen_type[3] == "large", chosen_type  # the site's default type, on both
        assert not any(f[0] == "continue_from" for f in pages), "a new workspace has nothing to continue from"

        # an administrator's header has the administration pages, on the hub's pages too
        context.clear_cookies()
        login(page, hub, hub.settings.admin_user, ADMIN_PASSWORD)
        admin = header(page)
        assert [label for label, _ in admin["nav"]][-4:] == ["Admin", "Users", "Token", "Help"], admin["nav"]
        page.goto(f"{hub.url}/hub/admin")
        assert header(page)["nav"] == admin["nav"]
    finally:
        context.close()
    assert errors == [], errors
