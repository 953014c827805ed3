"""Fixtures the unit tests share: a real SQLite database and a copying home store in a temporary directory."""

import os

import pytest

from workspace.db import Database
from workspace.homes import CopyHomeStore


@pytest.fixture
def sqlite(tmp_path) -> Database:
    return Database(f"sqlite:///{tmp_path / 'w.sqlite'}")


@pytest.fixture
def store(tmp_path) -> CopyHomeStore:
    return CopyHomeStore(root=str(tmp_path / "store"), uid=os.getuid(), gid=os.getgid()).setup()
