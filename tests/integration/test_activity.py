"""GET /api/activity: what ran and waited over the last day, for administrators; a student's 403 and a bad
window's 400 change nothing and say why."""

from __future__ import annotations

from tests.integration.hub import ADMIN_PASSWORD, Hub


def test_an_administrator_reads_the_days_activity_a_student_cannot(hub: Hub):
    student = hub.user_token("ari")
    hub.start_workspace("ari", "now", student)
    try:
        admin = hub.user_token(hub.settings.admin_user, password=ADMIN_PASSWORD)
        r = hub.service_api("/activity", admin)
        assert r.status_code == 200, r.text
        a = r.json()
        assert len(a["at"]) == len(a["running"]) == len(a["queued"]) == 289 and a["step"] == 300
        assert a["running"][-1] >= 1, a["running"][-5:]

        r = hub.service_api("/activity", admin, hours="2", step="60")
        assert r.status_code == 200 and len(r.json()["at"]) == 121

        # attack: a student may not see the platform's activity, whatever they ask for
        for params in ({}, {"user": hub.settings.admin_user}, {"hours": "24"}):
            r = hub.service_api("/activity", student, **params)
            assert r.status_code == 403 and "Only administrators" in r.json()["message"], r.text
        assert hub.service_api("/activity", None).status_code == 403

        # attack: a window that would make the service count without end
        for hours, step in (("1e308", None), ("inf", None), ("nan", None), ("24", "1"), ("336", "10"), ("-3", None)):
            r = hub.service_api("/activity", admin, hours=hours, **({"step": step} if step else {}))
            assert r.status_code == 400 and r.json()["message"], (hours, step, r.text)
    finally:
        hub.stop_workspace("ari", "now", student)
