"""A start's maximum run time: the idle policy, which holds it, as both the start and the culler read it.

The spawner tells a start how long it may run (`runtime_notice`, in the start's progress); the culler
stops it then (workspace/culler). Both read the one `IdlePolicy`: the hub's configuration, then the
culler's own file (`Culler.config_file`), so that the sentence and the stop agree. The policy's other
settings (browser, CPU, GPU) are the culler's alone (workspace/culler/idle.py), but they are one
traitlets section (`c.IdlePolicy.x`) with one set of overrides, so the class lives here whole.

Pure, but for `site_policy`, which runs the culler's own file.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

from traitlets import Dict, Float
from traitlets.config import Config, Configurable, PyFileConfigLoader

from workspace import i18n

DEFAULT_MAX_RUNTIME = 24 * 3600  # seconds: a day, for workspaces and tasks alike
POLICY_FIELDS = ("browser_timeout", "cpu_threshold", "cpu_window", "gpu_threshold", "max_runtime", "warn_before")


class IdlePolicy(Configurable):
    """The idle policy, with overrides per resource type, group and user."""

    browser_timeout = Float(
        1800,
        config=True,
        help="""Seconds without a browser attached (no kernel or terminal
        websocket, no request from a JupyterLab tab) before a workspace may be
        culled.""",
    )
    cpu_threshold = Float(
        5.0,
        config=True,
        help="""CPU use, in percent of one core, under which a workspace counts
        as idle (measured from its container's cgroup).""",
    )
    cpu_window = Float(
        1800,
        config=True,
        help="""Seconds the CPU (and GPU) use must stay under the threshold
        before a workspace may be culled.""",
    )
    gpu_threshold = Float(
        10.0,
        config=True,
        help="""GPU utilisation, in percent, at or above which a workspace with
        GPUs is busy (training keeps it alive with the tab closed).""",
    )
    max_runtime = Float(
        DEFAULT_MAX_RUNTIME,
        config=True,
        help="""Seconds after which a workspace or a task is stopped whatever it
        does (its home saved, stop reason `max_runtime`); the start says it.
        A resource type's own `max_runtime` replaces it for that type (and
        `overrides` may set it per kind, type, group or user). 0: no limit, so that one
        start may hold its CPU, memory and GPUs forever.""",
    )
    warn_before = Float(
        300,
        config=True,
        help="""Seconds between the warning (a JupyterLab notification and a
        line in every terminal) and the cull. 0: no warning.""",
    )
    overrides = Dict(
        {},
        config=True,
        help="""Policy values for some workspaces, keyed `kind:task` or
        `kind:workspace`, `resource_type:NAME`, `group:NAME` or `user:NAME`, e.g.
        `{"kind:task": {"max_runtime": 259200}, "resource_type:debug": {"max_runtime": 10800},
        "group:thesis": {"browser_timeout": 7200}}`. They apply in that order
        (kind, resource type, then groups in name order, then the user), each
        over the previous; a resource type's own `max_runtime` comes after the
        kind's and before the type's overrides.""",
    )

    def limits(
        self,
        user: str = "",
        groups=(),
        resource_type: str | None = None,
        kind: str = "workspace",
        type_max_runtime: float | None = None,
    ) -> "Limits":
        """The limits of one execution, the more specific winning: these options, the overrides of its
        kind, its resource type's own maximum run time (`type_max_runtime`, recorded on the execution),
        then the overrides of its type, its groups (in name order) and its user."""
        values = {name: getattr(self, name) for name in POLICY_FIELDS}
        self._override(values, f"kind:{kind}")
        if type_max_runtime:
            values["max_runtime"] = float(type_max_runtime)
        keys = (
            ([f"resource_type:{resource_type}"] if resource_type else [])
            + [f"group:{g}" for g in sorted(groups)]
            + [f"user:{user}"]
        )
        for key in keys:
            self._override(values, key)
        return Limits(**values)

    def _override(self, values: dict, key: str) -> None:
        for name, value in (self.overrides.get(key) or {}).items():
            if name not in POLICY_FIELDS:
                raise ValueError(
                    f"IdlePolicy.overrides[{key!r}]: unknown setting {name!r}; use one of {', '.join(POLICY_FIELDS)}"
                )
            values[name] = float(value)


@dataclass(frozen=True)
class Limits:
    browser_timeout: float
    cpu_threshold: float
    cpu_window: float
    gpu_threshold: float
    max_runtime: float
    warn_before: float


def duration(seconds: float, locale: str = i18n.DEFAULT) -> str:
    """`45 s`, `31 min`, `3 h 5 min` (in `locale`)."""
    seconds = max(0, int(round(seconds)))
    if seconds < 120:
        return i18n.translate(locale, "{seconds} s", seconds=seconds)
    minutes = seconds // 60
    if minutes < 120:
        return i18n.translate(locale, "{minutes} min", minutes=minutes)
    hours, minutes = divmod(minutes, 60)
    if minutes:
        return i18n.translate(locale, "{hours} h {minutes} min", hours=hours, minutes=minutes)
    return i18n.translate(locale, "{hours} h", hours=hours)


def max_runtime_notice(max_runtime: float, task: bool, locale: str = i18n.DEFAULT) -> str | None:
    """What a start tells its user of its maximum run time (None: it has none)."""
    if max_runtime <= 0:
        return None
    if task:
        text = i18n.N_("This task is stopped after {maximum} at the latest (its maximum run time); its home is saved.")
    else:
        text = i18n.N_(
            "This workspace is stopped after {maximum} at the latest (its maximum run time); "
            "its home is saved, and you can start it again."
        )
    return i18n.translate(locale, text, maximum=duration(max_runtime, locale))


def site_policy(hub_config) -> IdlePolicy:
    """The idle policy as the culler applies it: the hub's configuration (`hub_config`), then the
    culler's own file (`Culler.config_file`), if there is one. Blocking: it runs that file."""
    merged = Config({"IdlePolicy": copy.deepcopy(hub_config.IdlePolicy)})
    path = Path(hub_config.Culler.get("config_file") or "")
    if path.name and path.is_file():
        merged.merge(PyFileConfigLoader(path.name, str(path.parent)).load_config())
    return IdlePolicy(config=merged)


def runtime_notice(hub_config, user: str, groups, resource_type, task: bool, locale: str) -> str | None:
    """What a start tells its user of its maximum run time, as the culler will enforce it (None: none).
    Blocking (see `site_policy`)."""
    limits = site_policy(hub_config).limits(
        user,
        groups,
        resource_type.name if resource_type else None,
        kind="task" if task else "workspace",
        type_max_runtime=resource_type.max_runtime if resource_type else None,
    )
    return max_runtime_notice(limits.max_runtime, task, locale)
