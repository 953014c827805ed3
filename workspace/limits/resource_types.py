"""Resource types: what a student picks for a start ("CPU 2 cores", "1 × A100").

A type has CPU, memory, GPU count and model, home size limit, maximum run
time, the groups allowed to use it, a capacity (how many may run at once on a
node) and a limit per user. A type with `root` gives root inside (sudo): it
runs only on nodes whose engine puts workspaces in a user namespace
(SECURITY.md, "Root inside"). It is configured in jupyterhub_config.py
(`WorkspaceMixin.resource_types`); the queue that admits starts of a type is
workspace/limits/queue.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from workspace import i18n
from workspace.errors import UserError
from workspace.sizes import parse_bytes


@dataclass(frozen=True)
class ResourceType:
    name: str
    description: str = ""
    cpu: float | None = None  # cores
    memory: int | None = None  # bytes
    gpus: int = 0
    gpu_model: str | None = None
    home_size: int | None = None  # bytes
    max_runtime: float | None = None  # seconds
    groups: tuple[str, ...] = ()  # who may use it (empty: everyone)
    capacity: int | None = None  # how many at once per node (None: no limit)
    pids: int | None = None  # processes (and threads) at most; None: the spawner's default, 0: none
    home_files: int | None = None  # files a home may hold; None: the spawner's default, 0: none
    per_user: int | None = None  # how many of this type one user may hold at once (None: no limit)
    max_nodes: int = 4  # how many nodes a job of this type may span (#31; 1: no jobs over several nodes)
    spread: bool = False  # a job's ranks each on a node of its own (multi-node training), not packed
    # root inside (sudo, apt-get) on a node whose engine runs workspaces in a user namespace (#32; SECURITY.md)
    root: bool = False

    @classmethod
    def from_config(cls, d: dict) -> "ResourceType":
        known = {
            "name",
            "description",
            "cpu",
            "memory",
            "gpus",
            "gpu_model",
            "home_size",
            "max_runtime",
            "groups",
            "capacity",
            "pids",
            "per_user",
            "home_files",
            "max_nodes",
            "spread",
            "root",
        }
        unknown = set(d) - known
        if unknown:
            raise ValueError(
                f"resource type {d.get('name')!r}: unknown setting(s) {', '.join(sorted(unknown))}; "
                f"use {', '.join(sorted(known))}"
            )
        if not d.get("name"):
            raise ValueError("every resource type needs a name")
        return cls(
            name=str(d["name"]),
            description=str(d.get("description") or ""),
            cpu=float(d["cpu"]) if d.get("cpu") is not None else None,
            memory=parse_bytes(d.get("memory")),
            gpus=int(d.get("gpus") or 0),
            gpu_model=d.get("gpu_model"),
            home_size=parse_bytes(d.get("home_size")),
            max_runtime=float(d["max_runtime"]) if d.get("max_runtime") else None,
            groups=tuple(d.get("groups") or ()),
            capacity=int(d["capacity"]) if d.get("capacity") else None,
            pids=int(d["pids"]) if d.get("pids") is not None else None,
            home_files=int(d["home_files"]) if d.get("home_files") is not None else None,
            # a GPU type: one at a time per user unless the type says otherwise
            per_user=int(d["per_user"]) if d.get("per_user") else (1 if int(d.get("gpus") or 0) else None),
            max_nodes=int(d["max_nodes"]) if d.get("max_nodes") is not None else 4,
            spread=bool(d.get("spread", False)),
            root=bool(d.get("root", False)),
        )

    @property
    def limited(self) -> bool:
        """Whether a start may have to wait for this type."""
        return self.capacity is not None or self.gpus > 0

    def allowed(self, groups) -> bool:
        return not self.groups or bool(set(self.groups) & set(groups))

    def summary(self, locale: str = "en") -> str:
        """`2 CPU, 8 GB memory, 1 × A100, at most 4 h`, in `locale`."""
        parts = []
        if self.cpu:
            parts.append(i18n.translate(locale, "{cores:g} CPU", cores=self.cpu))
        if self.memory:
            parts.append(i18n.translate(locale, "{gb:g} GB memory", gb=self.memory / (1 << 30)))
        if self.gpus:
            parts.append(f"{self.gpus} × {self.gpu_model or 'GPU'}")  # no word to translate
        if self.max_runtime:
            parts.append(i18n.translate(locale, "at most {hours:g} h", hours=self.max_runtime / 3600))
        if self.root:
            parts.append(i18n.translate(locale, "root inside (sudo)"))
        # the separator of a list of a resource type's figures
        return i18n.translate(locale, ", ").join(parts) or i18n.translate(locale, "no limits")


def default_name(types: list[ResourceType], default: str | None) -> str | None:
    """The type a start gets when it chooses none: the configured default, else the first type (None: no types)."""
    return default or (types[0].name if types else None)


def choose(types: list[ResourceType], wanted: str | None, default: str | None, groups) -> ResourceType | None:
    """The resource type of a start, or the user's 400/403. None when no types are configured."""
    if not types:
        if wanted:
            raise UserError(400, "This server has no resource types, so “{wanted}” cannot be chosen.", wanted=wanted)
        return None
    by_name = {t.name: t for t in types}
    name = wanted or default_name(types, default)
    if name not in by_name:
        raise UserError(
            400, "There is no resource type “{name}”. Choose one of: {choices}.", name=name, choices=", ".join(by_name)
        )
    rtype = by_name[name]
    if not rtype.allowed(groups):
        raise UserError(
            403,
            "The resource type “{name}” is for the group(s) {groups}; "
            "ask your instructor for access or choose another type.",
            name=name,
            groups=", ".join(rtype.groups),
        )
    return rtype
