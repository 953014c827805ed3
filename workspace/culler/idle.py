"""When is a workspace idle? The culler's memory and its evidence, under the idle policy.

The policy (`IdlePolicy`, its `Limits`) is in workspace/limits/runtime.py: a start reads its maximum run
time there too. Pure logic, no I/O: `workspace/culler/app.py` observes every running execution
once a cycle and asks `Watch.decide()` what to do. Times are seconds since
the epoch, from a clock the caller passes in (tests move it).

A workspace is idle when no browser has been attached for `browser_timeout`
AND its CPU has stayed under `cpu_threshold` for `cpu_window` (and, with
GPUs, their utilisation under `gpu_threshold` for the same window). Before a
cull the user is warned `warn_before` ahead; any activity in the meantime (a
browser, CPU, GPU) withdraws the warning. `max_runtime` stops a workspace
or a task regardless of activity, also after a warning: by default after a
day, so that nothing (`sleep infinity` in a task, a forgotten busy loop)
holds its CPU, memory and GPUs forever.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from dataclasses import dataclass, field

from workspace import i18n
from workspace.limits.runtime import Limits, duration


@dataclass
class Observation:
    """What the culler saw of one execution in one cycle."""

    now: float
    started: float
    # kernel and terminal websockets open now
    browser_connections: int = 0
    # the last request a browser made (or the hub's last_activity when the workspace cannot tell)
    last_browser: float | None = None
    # CPU use since the previous observation, percent of one core; None: unknown (counts as busy)
    cpu_percent: float | None = None
    # highest utilisation of the execution's GPUs; None: no GPU
    gpu_percent: float | None = None


@dataclass
class Warning:
    kind: str  # "idle" or "max_runtime"
    at: float
    stop_at: float

    @property
    def notice_id(self) -> str:
        return f"cull-{self.kind}"


@dataclass
class Verdict:
    action: str  # keep | warn | withdraw | cull
    reason: str | None = None  # idle | max_runtime
    message: str | None = None  # for the user
    evidence: str | None = None  # for the record: why
    stop_at: float | None = None


def clock_time(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%H:%M UTC")


@dataclass
class Watch:
    """The culler's memory of one running execution."""

    first_seen: float
    last_browser: float
    cpu_busy_at: float
    gpu_busy_at: float | None = None
    # (time, seconds covered, percent) of each CPU reading, for the window's average
    cpu_samples: deque = field(default_factory=lambda: deque(maxlen=10_000))
    warning: Warning | None = None

    @classmethod
    def start(cls, obs: Observation) -> "Watch":
        # CPU before the culler saw the workspace is unknown: the window starts now.
        watch = cls(first_seen=obs.now, last_browser=max(obs.started, obs.last_browser or 0), cpu_busy_at=obs.now)
        watch.cpu_samples.append((obs.now, 0.0, 0.0))  # the time the next reading covers from
        return watch

    def observe(self, obs: Observation, limits: Limits) -> None:
        now = obs.now
        if obs.browser_connections > 0:
            self.last_browser = now
        elif obs.last_browser is not None and obs.last_browser > self.last_browser:
            self.last_browser = min(obs.last_browser, now)
        if obs.cpu_percent is None or obs.cpu_percent >= limits.cpu_threshold:
            self.cpu_busy_at = now
        if obs.cpu_percent is not None and self.cpu_samples:
            covered = now - self.cpu_samples[-1][0]
            self.cpu_samples.append((now, covered, obs.cpu_percent))
        else:
            self.cpu_samples.append((now, 0.0, obs.cpu_percent or 0.0))
        while self.cpu_samples and self.cpu_samples[0][0] < now - 2 * max(limits.cpu_window, 60):
            self.cpu_samples.popleft()
        if obs.gpu_percent is not None:
            if self.gpu_busy_at is None or obs.gpu_percent >= limits.gpu_threshold:
                self.gpu_busy_at = now

    def cpu_average(self, now: float, window: float) -> float | None:
        """Average CPU (percent of one core) over the last `window` seconds of readings."""
        total = covered = 0.0
        for t, span, pct in self.cpu_samples:
            if t > now - window and span > 0:
                total += pct * span
                covered += span
        return total / covered if covered else None

    def idle_at(self, limits: Limits) -> float:
        """When the workspace is (or will be, if nothing happens) idle."""
        at = max(self.last_browser + limits.browser_timeout, self.cpu_busy_at + limits.cpu_window)
        if self.gpu_busy_at is not None:
            at = max(at, self.gpu_busy_at + limits.cpu_window)
        return at

    def evidence(self, now: float, limits: Limits, gpu_percent: float | None, locale: str = i18n.DEFAULT) -> str:
        """Why an idle workspace was stopped, for its record: in `locale`, the language it was started in
        (its owner reads it; an execution's records are kept in its language)."""
        avg = self.cpu_average(now, limits.cpu_window)
        figures = dict(
            browser=duration(now - self.last_browser, locale),
            cpu=avg,
            span=duration(min(limits.cpu_window, now - self.first_seen), locale),
            gpu=gpu_percent,
        )
        if avg is not None and gpu_percent is not None:
            text = i18n.N_("no browser for {browser}; CPU {cpu:.1f} % average over {span}; GPU {gpu:.0f} %")
        elif avg is not None:
            text = i18n.N_("no browser for {browser}; CPU {cpu:.1f} % average over {span}")
        elif gpu_percent is not None:
            text = i18n.N_("no browser for {browser}; GPU {gpu:.0f} %")
        else:
            text = i18n.N_("no browser for {browser}")
        return i18n.translate(locale, text, **figures)

    def decide(self, obs: Observation, limits: Limits, locale: str = i18n.DEFAULT) -> Verdict:
        """Update the memory with `obs` and say what to do now (the user's messages in `locale`)."""
        self.observe(obs, limits)
        verdict = self.max_runtime_verdict(obs, limits, locale)
        if verdict is not None:
            return verdict
        if self.warning is not None and self.warning.kind == "max_runtime":
            return Verdict("keep")
        return self.idle_verdict(obs, limits, locale)

    def max_runtime_verdict(self, obs: Observation, limits: Limits, locale: str) -> Verdict | None:
        """Cull past the maximum run time, whatever the workspace does; warn once, `warn_before` ahead of it.
        None: neither (no maximum, or not near it)."""
        now = obs.now
        if limits.max_runtime > 0:
            end = obs.started + limits.max_runtime
            if now >= end:
                return Verdict(
                    "cull",
                    "max_runtime",
                    evidence=i18n.translate(
                        locale,
                        "ran for {ran}; the maximum run time is {maximum}",
                        ran=duration(now - obs.started, locale),
                        maximum=duration(limits.max_runtime, locale),
                    ),
                )
            if (
                now >= end - limits.warn_before
                and limits.warn_before > 0
                and (self.warning is None or self.warning.kind != "max_runtime")
            ):
                self.warning = Warning("max_runtime", now, end)
                return Verdict(
                    "warn",
                    "max_runtime",
                    stop_at=end,
                    message=i18n.translate(
                        locale,
                        "This workspace will be stopped at {time} (in {left}): it reaches "
                        "its maximum run time of {maximum}. Your home is saved when it stops; "
                        "you can start it again and continue from this execution.",
                        time=clock_time(end),
                        left=duration(end - now, locale),
                        maximum=duration(limits.max_runtime, locale),
                    ),
                )
        return None

    def active_since_warning(self) -> bool:
        """Whether a browser, the CPU or a GPU was busy after the idle warning (False: no warning)."""
        return self.warning is not None and (
            self.last_browser > self.warning.at
            or self.cpu_busy_at > self.warning.at
            or (self.gpu_busy_at is not None and self.gpu_busy_at > self.warning.at)
        )

    def idle_verdict(self, obs: Observation, limits: Limits, locale: str) -> Verdict:
        """Withdraw the idle warning on activity; cull once the warned time came (at once without warnings);
        warn ahead of the predicted idle time."""
        now = obs.now
        if self.active_since_warning():
            self.warning = None
            return Verdict(
                "withdraw", "idle", message=i18n.translate(locale, "Activity seen: this workspace keeps running.")
            )
        idle_at = self.idle_at(limits)
        if self.warning is not None:
            if now >= self.warning.stop_at:
                return Verdict("cull", "idle", evidence=self.evidence(now, limits, obs.gpu_percent, locale))
            return Verdict("keep")
        if limits.warn_before <= 0:
            if now >= idle_at:
                return Verdict("cull", "idle", evidence=self.evidence(now, limits, obs.gpu_percent, locale))
            return Verdict("keep")
        # Warn ahead of the predicted idle time, but only while the latest
        # readings are idle: a busy reading is no prediction of idleness (and
        # with cpu_window < warn_before, warnings would flap every cycle).
        busy_now = self.cpu_busy_at >= now or (self.gpu_busy_at is not None and self.gpu_busy_at >= now)
        if now >= idle_at - limits.warn_before and not busy_now:
            return self.idle_warning(now, max(idle_at, now + limits.warn_before), limits, locale)
        return Verdict("keep")

    def idle_warning(self, now: float, stop_at: float, limits: Limits, locale: str) -> Verdict:
        """Warn that the workspace, idle, is stopped at `stop_at`; remember the warning."""
        self.warning = Warning("idle", now, stop_at)
        return Verdict(
            "warn",
            "idle",
            stop_at=stop_at,
            message=i18n.translate(
                locale,
                "This workspace seems idle (no open tab, CPU under {threshold:g} %) and will be "
                "stopped at {time} (in {left}) to free its resources. "
                "Open it in your browser or keep a program running to keep it. Your home is saved when it stops.",
                threshold=limits.cpu_threshold,
                time=clock_time(stop_at),
                left=duration(stop_at - now, locale),
            ),
        )
