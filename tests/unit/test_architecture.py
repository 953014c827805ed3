"""The house as docs/architecture.md draws it: every room on the map, no import cycles, the layers cover
the whole package, and the two pieces of code that run outside the hub import what is there with them.

The walls themselves are import-linter's contracts (pyproject.toml, `make lint`); these tests keep the
map and the contracts from drifting apart from the package as it grows.
"""

import fnmatch
import re
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "workspace"
MAP = ROOT / "docs" / "architecture.md"


def rooms() -> list[str]:
    """The package's rooms: its folders that are packages (`store/`) and its top-level modules (`db.py`)."""
    folders = [f"{p.name}/" for p in sorted(PACKAGE.iterdir()) if (p / "__init__.py").is_file()]
    modules = [p.name for p in sorted(PACKAGE.glob("*.py")) if p.name != "__init__.py"]
    return folders + modules


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph("workspace")


def test_every_room_of_the_package_is_on_the_map():
    text = MAP.read_text()
    missing = [room for room in rooms() if f"`{room}`" not in text]
    assert not missing, f"docs/architecture.md does not name {missing}: say what each owns and where it sits"


def test_every_module_of_a_folder_is_on_the_map():
    """A folder's table row names its modules (`homes`, `copier`, ... or a pattern such as `*_api`), so a reader
    finds a module in one guess."""
    names = set(re.findall(r"`([^`\s]+)`", MAP.read_text()))
    patterns = [name for name in names if "*" in name]
    missing = []
    for folder in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        for module in sorted(folder.glob("*.py")):
            if module.stem in ("__init__", "__main__") or module.stem in names:
                continue
            if not any(fnmatch.fnmatchcase(module.stem, pattern) for pattern in patterns):
                missing.append(f"{folder.name}/{module.name}")
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_the_layers_contract_places_every_room():
    """A room left out of the layers contract is a room no wall holds: name it in a layer (pyproject.toml)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")
    placed = {name.strip() for layer in layers["layers"] for name in layer.replace(":", "|").split("|")}
    names = {room.removesuffix("/").removesuffix(".py") for room in rooms()}
    assert names - placed == set(), f"rooms in no layer of the layers contract: {sorted(names - placed)}"
    assert placed - names == set(), f"the layers contract names rooms that do not exist: {sorted(placed - names)}"


def cycles(graph) -> list[list[str]]:
    """The groups of modules that import each other round (more than one module each), found with grimp's own
    chains: a module is on a cycle when a module it imports leads back to it."""
    on_cycle = {
        m
        for m in graph.modules
        if any(graph.chain_exists(importer=d, imported=m) for d in graph.find_modules_directly_imported_by(m))
    }

    def round_trip(a: str, b: str) -> bool:
        return graph.chain_exists(importer=a, imported=b) and graph.chain_exists(importer=b, imported=a)

    groups = {frozenset({m, *(n for n in on_cycle if n != m and round_trip(m, n))}) for m in on_cycle}
    return sorted(sorted(group) for group in groups)


def test_no_module_imports_itself_back(graph):
    """No import cycle, lazy imports inside functions included (they are cycles a reader still has to untie)."""
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]:
        graph.add_import(importer=importer, imported=imported)

    assert cycles(graph) == [["a", "b", "c"]]


def test_the_unpacker_imports_nothing_of_the_package(graph):
    """It runs as a script (`python -I unpacker.py`) in a throwaway container that holds nothing else of ours."""
    assert {m for m in graph.find_modules_directly_imported_by("workspace.uploads.unpacker")} == set()


def test_the_single_user_extension_imports_only_what_the_image_holds(graph):
    """The image holds workspace/__init__.py, workspace/usage.py and workspace/singleuser/ (setup/images.py)."""
    inside = {"workspace", "workspace.usage"} | {m for m in graph.modules if m.startswith("workspace.singleuser")}
    for module in sorted(m for m in graph.modules if m.startswith("workspace.singleuser")):
        outside = graph.find_modules_directly_imported_by(module) - inside
        assert not outside, f"{module} imports {sorted(outside)}, which the image does not hold"
