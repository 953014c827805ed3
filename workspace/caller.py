"""Who asks: the one value every permission check reads (a user's name, groups, whether an administrator).

The service builds it from the hub's user model (`Caller.of`), the spawner from the user it starts for;
the checks (datasets, images, uploads) take it whole instead of three loose arguments that a call could
give in the wrong order. It imports nothing of the package: it is ground every layer stands on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    """Who asks: a user's name, the groups they are in, whether they are an administrator."""

    name: str
    groups: frozenset[str] = frozenset()
    admin: bool = False

    def __post_init__(self):
        # any iterable of names is accepted (the hub's list, a set); kept frozen, so a Caller is hashable
        # and no check can change the groups another check then reads
        object.__setattr__(self, "groups", frozenset(self.groups or ()))
        object.__setattr__(self, "admin", bool(self.admin))

    @classmethod
    def of(cls, user_model: Mapping) -> Caller:
        """The caller a JupyterHub user model describes ({"name", "groups", "admin", ...})."""
        return cls(user_model["name"], user_model.get("groups") or (), bool(user_model.get("admin")))
