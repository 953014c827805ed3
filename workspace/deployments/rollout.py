"""What the controller does with one deployment this round (#33): pure decisions, no I/O, so every rule
here is a unit test.

Given the deployment as the records say (`DeploymentView`: its replicas with their executions' states and
this round's readiness checks), `plan` decides:

- a replica whose server ended is forgotten; if it still served a wanted version it is replaced, after a
  wait that doubles while replicas die soon after their start (the backoff of a crash loop);
- a version being rolled out is promoted once its replicas are ready (all the wanted ones; the first
  version: one), and the version it replaces drains: out of the router's table, stopped `drain_seconds`
  later. A version whose replicas keep ending before they are ready, or that is not ready within
  `ready_timeout`, is given up: its replicas stop and the serving version goes on serving;
- each wanted version has as many replicas as the deployment wants; versions no longer wanted, and a
  stopped, deleted or sleeping deployment, drain;
- readiness: a starting replica that answers is ready; a ready one failing `UNREADY_AFTER` checks in a row
  gets no requests until it answers again;
- scale to zero: a deployment with `idle_seconds` and no request for that long sleeps; a request wakes it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from workspace import i18n
from workspace.executions import FINAL

from .records import LIVE

UNREADY_AFTER = 3  # readiness checks failed in a row
STEADY = dt.timedelta(minutes=2)  # a replica that served this long and then died is restarted at once


@dataclass
class ReplicaView:
    id: int
    server: str
    version: int
    state: str
    address: str | None = None
    run_state: str | None = None  # its newest execution's state (None: no execution yet)
    run_detail: str | None = None  # why that execution ended
    restarts: int = 0
    failed_checks: int = 0
    created: dt.datetime | None = None
    ready_at: dt.datetime | None = None
    not_before: dt.datetime | None = None
    check: bool | None = None  # this round's readiness check (None: not checked)


@dataclass
class DeploymentView:
    id: int
    running: bool
    deleted: bool
    replicas: int  # wanted
    serving: int | None
    rolling: int | None
    rolling_since: dt.datetime | None
    asleep: bool = False
    woken: dt.datetime | None = None
    idle_seconds: int | None = None
    last_request: dt.datetime | None = None
    failed_starts: dict[int, int] = field(default_factory=dict)  # version -> its replicas ended before ready
    replica_list: list[ReplicaView] = field(default_factory=list)


@dataclass
class Rules:
    """The policy's figures a plan needs (policy.DeploymentPolicy)."""

    ready_timeout: float = 600
    failures_before_giving_up: int = 3
    drain_seconds: float = 5
    restart_backoff_max: float = 60


@dataclass
class Plan:
    new: list[tuple[int, int, dt.datetime | None]] = field(default_factory=list)  # (version, restarts, not before)
    changes: dict[int, dict] = field(default_factory=dict)  # replica id -> its fields
    forget: list[int] = field(default_factory=list)  # replica ids whose records go
    ask: list[ReplicaView] = field(default_factory=list)  # servers to start
    stop: list[ReplicaView] = field(default_factory=list)  # servers to stop
    deployment: dict = field(default_factory=dict)  # the deployment's fields
    versions: dict[int, dict] = field(default_factory=dict)  # version number -> its fields
    restarted: int = 0  # replicas that died serving (the deployment's count)
    remove: bool = False  # the deleted deployment's records go

    def change(self, replica: ReplicaView, **fields) -> None:
        self.changes.setdefault(replica.id, {}).update(fields)
        for name, value in fields.items():
            setattr(replica, name, value)


def plan(view: DeploymentView, now: dt.datetime, rules: Rules) -> Plan:
    out = Plan()
    alive = _ended(view, now, rules, out)
    active = view.running and not view.deleted and not _sleeps(view, now, out)
    _readiness(alive, now, out)
    if active and view.rolling is not None:
        _roll(view, alive, now, rules, out)
    wanted = {v for v in (view.serving, view.rolling) if v is not None} if active else set()
    for version in sorted(wanted):
        _scale(view, [r for r in alive if r.version == version and r.state in LIVE], version, now, rules, out)
    for r in alive:
        if r.state in LIVE and r.version not in wanted:
            _drain(r, now, rules, out)
    for r in alive:
        if r.state == "waiting" and (r.not_before is None or r.not_before <= now):
            out.change(r, state="starting")
            out.ask.append(r)
        elif r.state in ("draining", "stopping") and (r.not_before is None or r.not_before <= now):
            # a stop asked again after a while: the first one may not have reached the hub
            out.change(r, state="stopping", not_before=now + dt.timedelta(seconds=30))
            out.stop.append(r)
    if view.deleted and not alive and not out.new:
        out.remove = True
    return out


def _ended(view: DeploymentView, now: dt.datetime, rules: Rules, out: Plan) -> list[ReplicaView]:
    """The replicas whose server still runs (or is yet to); those that ended are forgotten, and replaced
    when they served a wanted version."""
    alive = []
    for r in view.replica_list:
        if r.state == "waiting" or r.run_state not in FINAL:
            alive.append(r)
            continue
        out.forget.append(r.id)
        if r.state not in ("starting", "ready", "unready"):
            continue  # stopped on purpose
        wanted = r.version in (view.serving, view.rolling) and view.running and not view.deleted
        if r.ready_at is None:
            view.failed_starts[r.version] = view.failed_starts.get(r.version, 0) + 1
            out.versions.setdefault(r.version, {})["failed_starts"] = view.failed_starts[r.version]
        else:
            out.restarted += 1
        if wanted and not (r.version == view.rolling and _failed_too_often(view, r.version, rules)):
            steady = r.ready_at is not None and now - r.ready_at >= STEADY
            restarts = r.restarts + 1
            wait = 0.0 if steady else min(2.0 ** (restarts - 1), rules.restart_backoff_max)
            out.new.append((r.version, restarts, now + dt.timedelta(seconds=wait) if wait else None))
            why = r.run_detail or r.run_state
            out.deployment["message"] = i18n.kept(
                "Replica {server} ended ({why}); a new one replaces it.", server=r.server, why=why
            )
    return alive


def _failed_too_often(view: DeploymentView, version: int, rules: Rules) -> bool:
    return view.failed_starts.get(version, 0) >= rules.failures_before_giving_up


def _sleeps(view: DeploymentView, now: dt.datetime, out: Plan) -> bool:
    """Whether it sleeps this round (scaled to zero): asleep and not woken, or idle long enough now."""
    if view.asleep:
        if view.woken is None:
            return True
        out.deployment.update(asleep=False, woken=None, last_request=now)
        return False
    if view.idle_seconds and view.serving is not None and view.rolling is None:
        last = view.last_request
        if last is not None and now - last >= dt.timedelta(seconds=view.idle_seconds):
            out.deployment["asleep"] = True
            return True
    return False


def _readiness(alive: list[ReplicaView], now: dt.datetime, out: Plan) -> None:
    for r in alive:
        if r.check is None:
            continue
        if r.check and r.state in ("starting", "unready"):
            out.change(r, state="ready", ready_at=r.ready_at or now, failed_checks=0)
        elif r.check and r.failed_checks:
            out.change(r, failed_checks=0)
        elif not r.check and r.state == "ready":
            failed = r.failed_checks + 1
            out.change(r, failed_checks=failed, **({"state": "unready"} if failed >= UNREADY_AFTER else {}))


def _roll(view: DeploymentView, alive: list[ReplicaView], now: dt.datetime, rules: Rules, out: Plan) -> None:
    """Promote the version being rolled out once ready, or give it up."""
    new = view.rolling
    ready = [r for r in alive if r.version == new and r.state == "ready"]
    needed = view.replicas if view.serving is not None else 1
    if len(ready) >= needed:
        if view.serving is not None:
            out.versions.setdefault(view.serving, {})["state"] = "retired"
        out.versions.setdefault(new, {})["state"] = "serving"
        out.deployment.update(serving=new, rolling=None, rolling_since=None, message=None)
        if view.last_request is None:  # idle (scale to zero) counts from its first serving
            out.deployment["last_request"] = now
        view.serving, view.rolling = new, None
        return
    reason = _given_up(view, new, now, rules)
    if reason is None:
        return
    out.versions.setdefault(new, {}).update(state="failed", failure=reason)
    out.deployment.update(rolling=None, rolling_since=None, message=reason)
    view.rolling = None


def _given_up(view: DeploymentView, new: int, now: dt.datetime, rules: Rules) -> str | None:
    """Why the rollout of version `new` is given up (a kept sentence), or None: it goes on."""
    serving = view.serving
    if _failed_too_often(view, new, rules):
        why = next((r.run_detail for r in view.replica_list if r.version == new and r.run_detail), None) or "?"
        count = view.failed_starts[new]
        if serving is None:
            return i18n.kept(
                "Version {version} was not rolled out: its replicas ended {count} times before they were ready "
                "({why}). Nothing serves; fix the command or the output and make a new version.",
                version=new,
                count=count,
                why=why,
            )
        return i18n.kept(
            "Version {version} was not rolled out: its replicas ended {count} times before they were ready "
            "({why}). Version {serving} goes on serving.",
            version=new,
            count=count,
            why=why,
            serving=serving,
        )
    if view.rolling_since is None or now - view.rolling_since <= dt.timedelta(seconds=rules.ready_timeout):
        return None
    seconds = int(rules.ready_timeout)
    if serving is None:
        return i18n.kept(
            "Version {version} was not rolled out: its replicas were not ready within {seconds} seconds. Nothing "
            "serves; fix the command or the output and make a new version.",
            version=new,
            seconds=seconds,
        )
    return i18n.kept(
        "Version {version} was not rolled out: its replicas were not ready within {seconds} seconds. Version "
        "{serving} goes on serving.",
        version=new,
        seconds=seconds,
        serving=serving,
    )


def _scale(view: DeploymentView, live: list[ReplicaView], version: int, now, rules: Rules, out: Plan) -> None:
    """As many replicas of `version` as the deployment wants: new ones recorded, the extra ones drained."""
    coming = sum(1 for v, _, _ in out.new if v == version)
    missing = view.replicas - len(live) - coming
    out.new.extend((version, 0, None) for _ in range(missing))
    if len(live) + coming > view.replicas:
        order = {"waiting": 0, "starting": 1, "unready": 2, "ready": 3}
        extra = sorted(live, key=lambda r: (order[r.state], -(r.id)))[: len(live) + coming - view.replicas]
        for r in extra:
            _drain(r, now, rules, out)


def _drain(r: ReplicaView, now: dt.datetime, rules: Rules, out: Plan) -> None:
    """Out of the router's table; its server stops after `drain_seconds` when it was serving, at once
    otherwise. A replica whose server was never asked for is forgotten."""
    if r.state == "waiting":
        out.forget.append(r.id)
        r.state = "forgotten"
        return
    wait = rules.drain_seconds if r.state == "ready" else 0
    out.change(r, state="draining", not_before=now + dt.timedelta(seconds=wait))
