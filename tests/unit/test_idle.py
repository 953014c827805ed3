"""The idle policy with a movable clock: warnings, withdrawals, culls, max runtime, overrides."""

import re

import pytest

from workspace.culler.idle import Observation, Watch
from workspace.limits.runtime import IdlePolicy, Limits, duration
from workspace.limits.runtime import max_runtime_notice as runtime_notice

T0 = 1_800_000_000.0
LIMITS = Limits(
    browser_timeout=1800, cpu_threshold=5, cpu_window=1800, gpu_threshold=10, max_runtime=0, warn_before=300
)


class Clock:
    """Runs a watch cycle by cycle (every `step` seconds) from T0."""

    def __init__(self, limits=LIMITS, step=60, locale="en", **first):
        self.limits, self.step, self.now, self.locale = limits, step, T0, locale
        self.watch = Watch.start(self.obs(**first))

    def obs(self, **kw) -> Observation:
        kw.setdefault("cpu_percent", 0.5)
        return Observation(now=self.now, started=T0, **kw)

    def run(self, seconds: float, **kw) -> list[tuple[float, object]]:
        """Advance `seconds`, one observation per step, until a cull (the culler forgets the watch then).
        Returns the (time since T0, verdict) of the cycles that did something."""
        acted = []
        end = self.now + seconds
        while self.now < end:
            self.now += self.step
            v = self.watch.decide(self.obs(**kw), self.limits, self.locale)
            if v.action != "keep":
                acted.append((self.now - T0, v))
            if v.action == "cull":
                break
        return acted


def test_no_browser_and_idle_cpu_warns_then_culls_with_evidence():
    c = Clock()
    acted = c.run(2000)
    (t_warn, warn), (t_cull, cull) = acted[:2]
    # the CPU window starts when the culler first saw it (T0), the browser at the start
    assert warn.action == "warn" and warn.reason == "idle" and t_warn == 1800 - 300
    assert "will be stopped" in warn.message and "in 5 min" in warn.message and warn.stop_at == T0 + 1800
    assert cull.action == "cull" and cull.reason == "idle" and t_cull == 1800
    assert cull.evidence == "no browser for 30 min; CPU 0.5 % average over 30 min"


def test_an_open_websocket_keeps_it_forever():
    assert Clock().run(3 * 3600, browser_connections=1) == []


def test_browser_requests_keep_it_until_they_stop():
    c = Clock()
    for _ in range(30):
        assert c.run(60, last_browser=c.now + 60) == []  # a tab polling once a minute
    acted = c.run(1800)
    assert [v.action for _, v in acted] == ["warn", "cull"]
    assert acted[1][0] - 30 * 60 == 1800  # culled a browser_timeout after the last request


def test_a_busy_cpu_keeps_it_without_a_browser_and_unknown_cpu_counts_as_busy():
    assert Clock().run(3 * 3600, cpu_percent=80) == []
    assert Clock().run(3 * 3600, cpu_percent=None) == []
    c = Clock()
    assert c.run(3600, cpu_percent=80) == []
    acted = c.run(1800 + 60)
    assert acted and acted[-1][1].action == "cull" and acted[-1][0] == 3600 + 1800


def test_gpu_use_keeps_it_alive_and_idle_gpus_do_not():
    assert Clock().run(3 * 3600, gpu_percent=95) == []
    acted = Clock().run(2000, gpu_percent=0)
    assert [v.action for _, v in acted[:2]] == ["warn", "cull"]
    assert "GPU 0 %" in acted[1][1].evidence


def test_activity_after_the_warning_withdraws_it():
    c = Clock()
    ((_, warn),) = c.run(1500)
    assert warn.action == "warn"
    ((_, withdrawn),) = c.run(60, browser_connections=1)  # the student opens the tab
    assert withdrawn.action == "withdraw" and "keeps running" in withdrawn.message
    assert c.run(1800 - 300 - 60) == []  # a full timeout again before the next warning
    c2 = Clock()
    c2.run(1500)
    ((_, withdrawn),) = c2.run(60, cpu_percent=50)  # a job starts in a terminal
    assert withdrawn.action == "withdraw"


def test_max_runtime_stops_a_busy_attached_workspace_after_a_warning():
    limits = Limits(**{**LIMITS.__dict__, "max_runtime": 3 * 3600})
    c = Clock(limits=limits)
    acted = c.run(4 * 3600, cpu_percent=100, browser_connections=2)
    (t_warn, warn), (t_cull, cull) = acted
    assert warn.reason == "max_runtime" and t_warn == 3 * 3600 - 300 and "maximum run time of 3 h" in warn.message
    assert cull.reason == "max_runtime" and t_cull == 3 * 3600
    assert cull.evidence == "ran for 3 h; the maximum run time is 3 h"


def test_no_warning_when_warn_before_is_zero():
    c = Clock(limits=Limits(**{**LIMITS.__dict__, "warn_before": 0}))
    ((t, v),) = c.run(2000)
    assert v.action == "cull" and t == 1800


def test_a_late_first_warning_still_gives_the_full_notice():
    # a culler that starts (or restarts) after the workspace went idle warns first
    c = Clock(step=600)
    (t_warn, warn), (t_cull, cull) = c.run(3600)
    assert warn.stop_at - (T0 + t_warn) >= 300 and t_cull > t_warn


def test_cpu_average_weights_readings_by_the_time_they_cover():
    c = Clock()
    c.run(600, cpu_percent=0)
    c.run(600, cpu_percent=30)
    assert c.watch.cpu_average(c.now, 1200) == pytest.approx(15)
    assert c.watch.cpu_average(c.now, 600) == pytest.approx(30)


def test_overrides_apply_resource_type_then_groups_then_user():
    p = IdlePolicy(
        overrides={
            "resource_type:debug": {"max_runtime": 10800, "browser_timeout": 600},
            "group:thesis": {"browser_timeout": 7200},
            "user:ada": {"cpu_threshold": 20},
        }
    )
    assert p.limits("bob").browser_timeout == 1800
    debug = p.limits("bob", resource_type="debug")
    assert debug.max_runtime == 10800 and debug.browser_timeout == 600
    ada = p.limits("ada", groups=["thesis"], resource_type="debug")
    assert ada.browser_timeout == 7200 and ada.max_runtime == 10800 and ada.cpu_threshold == 20
    with pytest.raises(ValueError, match="unknown setting 'timeout'"):
        IdlePolicy(overrides={"user:x": {"timeout": 1}}).limits("x")


def test_nothing_runs_forever_by_default_a_type_sets_its_own_and_overrides_win():
    """#28: a day by default, for workspaces and tasks; a type's own maximum replaces it (longer or shorter);
    the overrides of a kind (`kind:task`) come before it, those of its type, groups and user after."""
    p = IdlePolicy()
    assert p.limits("bob").max_runtime == 24 * 3600 == p.limits("bob", kind="task").max_runtime
    assert p.limits("bob", resource_type="train", type_max_runtime=72 * 3600).max_runtime == 72 * 3600
    assert p.limits("bob", resource_type="debug", kind="task", type_max_runtime=3600).max_runtime == 3600
    p = IdlePolicy(
        overrides={"kind:task": {"max_runtime": 48 * 3600}, "resource_type:train": {"max_runtime": 96 * 3600}}
    )
    assert p.limits("bob", kind="task").max_runtime == 48 * 3600  # tasks of no type
    assert p.limits("bob").max_runtime == 24 * 3600  # workspaces keep the default
    # the more specific wins: a type's own maximum, then its overrides, over the kind's
    assert p.limits("bob", resource_type="debug", kind="task", type_max_runtime=3600).max_runtime == 3600
    assert p.limits("bob", resource_type="train", kind="task", type_max_runtime=3600).max_runtime == 96 * 3600
    assert p.limits("bob", resource_type="train").max_runtime == 96 * 3600
    assert IdlePolicy(max_runtime=0).limits("bob").max_runtime == 0  # a site may say none, explicitly


def test_a_task_running_forever_is_stopped_at_the_default_maximum():
    limits = IdlePolicy().limits("bob", kind="task")
    c = Clock(limits=Limits(**{**limits.__dict__, "warn_before": 0}), step=600)
    # the culler sees a task as always attached (browser_connections=1); `sleep infinity` uses no CPU
    ((t, v),) = c.run(30 * 3600, cpu_percent=0, browser_connections=1)
    assert v.action == "cull" and v.reason == "max_runtime" and t == 24 * 3600
    assert v.evidence == "ran for 24 h; the maximum run time is 24 h"


def test_the_start_says_the_maximum_run_time():
    assert runtime_notice(24 * 3600, task=False) == (
        "This workspace is stopped after 24 h at the latest (its maximum run time); "
        "its home is saved, and you can start it again."
    )
    assert "24 小时" in runtime_notice(24 * 3600, task=True, locale="zh_CN")
    assert runtime_notice(0, task=True) is None


def test_durations_read_well():
    assert [duration(s) for s in (45, 119, 1860, 7200, 11100)] == ["45 s", "119 s", "31 min", "2 h", "3 h 5 min"]


def test_a_busy_workspace_is_never_warned_even_with_a_short_cpu_window():
    limits = Limits(**{**LIMITS.__dict__, "browser_timeout": 14, "cpu_window": 5, "warn_before": 6})
    assert Clock(limits=limits, step=1).run(120, cpu_percent=90) == []
    c = Clock(limits=limits, step=1)
    acted = c.run(60)
    assert [v.action for _, v in acted] == ["warn", "cull"]


def test_a_workspace_started_in_chinese_is_warned_and_its_stop_recorded_in_chinese():
    # the culler passes the execution's language (the one it was started in)
    acted = Clock(locale="zh_CN").run(2000)
    (_, warn), (_, cull) = acted[:2]
    for text in (warn.message, cull.evidence):
        assert re.search(r"[\u4e00-\u9fff]", text) and "no browser" not in text, text
    assert "30" in cull.evidence and "0.5" in cull.evidence, cull.evidence
    limits = Limits(**{**LIMITS.__dict__, "max_runtime": 3 * 3600})
    (_, warn), (_, cull) = Clock(limits=limits, locale="zh_CN").run(4 * 3600, cpu_percent=100)
    assert re.search(r"[\u4e00-\u9fff]", cull.evidence) and "maximum run time" not in cull.evidence, cull.evidence
