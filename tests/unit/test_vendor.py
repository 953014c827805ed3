"""The third-party files the service serves are the ones their note says (static/vendor/*/SHA256SUMS)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

VENDOR = Path(__file__).resolve().parents[2] / "workspace" / "service" / "static" / "vendor"


@pytest.mark.parametrize("sums", sorted(VENDOR.glob("*/SHA256SUMS")), ids=lambda p: p.parent.name)
def test_vendored_files_match_their_pinned_hashes(sums):
    lines = [line.split() for line in sums.read_text().splitlines() if line.strip()]
    assert lines
    for digest, name in lines:
        assert hashlib.sha256((sums.parent / name).read_bytes()).hexdigest() == digest, name
    assert (sums.parent / "LICENSE").is_file()
