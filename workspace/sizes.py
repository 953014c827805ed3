"""Sizes as operators write them in the configuration: `4G`, `512M`, `1073741824`.

Resource types, quotas, scratch disks and image builds all take them; a ground module, so none of
them imports another for it.
"""

from __future__ import annotations

_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(value) -> int | None:
    """`4G`, `512M`, `1073741824` or None."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().lower().rstrip("ib").rstrip("b")
    if text and text[-1] in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1]])
    return int(float(text))
