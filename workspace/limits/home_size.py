"""The size limit of a live home: what it is, why, and how it is said.

A home's limit is its resource type's, or its size now plus what the owner's
storage quota has left when that is less, or in cleanup mode its size now
(plus slack); a home already larger than its type's limit may not grow (it is
never cut). The filesystem enforces it where it can (btrfs quota groups);
elsewhere it is watched and warned about. lifecycle.limit_home sets and
records it at a start.
"""

from __future__ import annotations

from dataclasses import dataclass

from workspace import i18n
from workspace.store.homes import HomeStore


@dataclass
class HomeLimit:
    bytes: int | None  # None: no limit
    enforced: bool  # by the filesystem (else watched and warned about)
    # why it is what it is, for the progress stream: "" (the type's), "cleanup" (cleanup mode: the home's
    # size now), "over" (the home is larger than the type's limit already: it may not grow), "quota"
    # (the home's size now and what the owner's storage quota has left, less than the type's)
    why: str = ""
    used: int = 0  # bytes the home took when the limit was set
    type_limit: int | None = None  # the resource type's limit (bytes)

    def describe(self, locale: str = i18n.DEFAULT) -> str | None:
        """The progress stream's sentence about the limit, in `locale` (None: no limit)."""
        if self.bytes is None:
            return None
        figures = dict(limit_gb=self.bytes / 1e9, used_gb=self.used / 1e9, type_gb=(self.type_limit or 0) / 1e9)
        if self.why == "cleanup" and self.enforced:
            message = i18n.N_(
                "Home size limit {limit_gb:,.2f} GB (writes past it fail (“Disk quota exceeded”)); "
                "cleanup mode: the home ({used_gb:,.2f} GB) may only shrink"
            )
        elif self.why == "cleanup":
            message = i18n.N_(
                "Home size limit {limit_gb:,.2f} GB (you are warned as the home nears it); "
                "cleanup mode: the home ({used_gb:,.2f} GB) may only shrink"
            )
        elif self.why == "over" and self.enforced:
            message = i18n.N_(
                "Home size limit {limit_gb:,.2f} GB (writes past it fail (“Disk quota exceeded”)); "
                "your home ({used_gb:,.2f} GB) is already larger than this resource type's {type_gb:,.2f} GB, "
                "so it may not grow: delete files, or choose a larger type"
            )
        elif self.why == "over":
            message = i18n.N_(
                "Home size limit {limit_gb:,.2f} GB (you are warned as the home nears it); "
                "your home ({used_gb:,.2f} GB) is already larger than this resource type's {type_gb:,.2f} GB, "
                "so it may not grow: delete files, or choose a larger type"
            )
        elif self.why == "quota" and self.enforced:
            message = i18n.N_(
                "Home size limit {limit_gb:,.2f} GB (writes past it fail (“Disk quota exceeded”)): "
                "your home ({used_gb:,.2f} GB) and what your storage quota has left"
            )
        elif self.why == "quota":
            message = i18n.N_(
                "Home size limit {limit_gb:,.2f} GB (you are warned as the home nears it): "
                "your home ({used_gb:,.2f} GB) and what your storage quota has left"
            )
        elif self.enforced:
            message = i18n.N_("Home size limit {limit_gb:,.2f} GB (writes past it fail (“Disk quota exceeded”))")
        else:
            message = i18n.N_("Home size limit {limit_gb:,.2f} GB (you are warned as the home nears it)")
        return i18n.translate(locale, message, **figures)


# A home at its quota (or its type's limit) may still grow this much: JupyterLab writes a little state.
MIN_GROWTH = 64 << 20


def home_limit(store: HomeStore, plan) -> HomeLimit:
    """The restored home's size limit (a `lifecycle.StartPlan`'s), set on the store; not recorded."""
    if plan.cleanup_slack is None and not plan.home_limit and plan.quota_room is None:
        return HomeLimit(None, False)
    used = store.home_usage(plan.live_key)
    why = ""
    if plan.cleanup_slack is not None:
        limit = used + plan.cleanup_slack
        why = "cleanup"
    else:
        limit = plan.home_limit
        # the footprint counts the restored output already: the home adds what it grows by
        by_quota = used + max(plan.quota_room, MIN_GROWTH) if plan.quota_room is not None else None
        if by_quota is not None and (not limit or by_quota < limit):
            limit, why = by_quota, "quota"
        elif used >= limit:
            limit = used + MIN_GROWTH
            why = "over"
    enforced = store.limit_home(plan.live_key, limit)
    return HomeLimit(limit, enforced, why, used, plan.home_limit)
