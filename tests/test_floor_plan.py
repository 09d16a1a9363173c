"""The floor plan of the code, checked mechanically (see docs/architecture.md).

- a module holds one concept: one past 800 lines gets a warning that asks whether it holds
  two, and one past 1,200 fails (a tight line cap splits one concept across modules, which
  makes it harder to read, so the warning comes well before the failure);
- the import graph of storage, serde, connector and jobs, built with ``ast``
  from every import statement (deferred imports inside functions and
  type-only imports under ``TYPE_CHECKING`` included: a type that two modules
  share lives in the lower one, or the upper one is named through a
  ``Protocol``), has no circle;
- layers: storage imports nothing of serde, connector or jobs; serde nothing
  of connector or jobs;
- no module imports a private name (``_x``) or a private module of storage,
  connector or jobs from outside the package that owns it;
- no module imports a private name (``_x``) of another module at all, its
  siblings in one package included (a name other modules use is part of its
  module's API, so it is public there); package ``__init__`` modules get no
  exception, none needs one;
- connector and jobs import the engine only through its public modules
  (``storage``, ``storage.keys``, ``storage.filters``, ``storage.engine``: see
  ``storage/engine.py``), never a module deeper in ``storage``.

Run as a script (``python3 tests/test_floor_plan.py``) it lists every import
of storage names by connector/ and jobs/.
"""

from __future__ import annotations

import ast
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("storage", "serde", "connector", "jobs")
LONG_MODULE = 800  # lines: past this, a warning that asks whether the module holds one concept
TOO_LONG_MODULE = 1200  # lines: past this, a failure: no one concept needs so many
LAYERS = {"storage": {"serde", "connector", "jobs"}, "serde": {"connector", "jobs"}}
PRIVATE_CHECKED = ("storage", "connector", "jobs")
ENGINE_CALLERS = ("connector", "jobs")  # layers that see the engine only through its public modules
ENGINE_PUBLIC = ("storage", "storage.keys", "storage.filters", "storage.engine")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module doing the import
    target: str  # dotted module imported (a submodule when the name is one)
    name: str | None  # the name taken from the target (None: the module itself)
    line: int


def _modules() -> dict[str, Path]:
    out = {}
    for top in PACKAGES:
        for path in sorted((REPO / top).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(module: str, path: Path) -> list[Import]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                if target.split(".")[0] in PACKAGES:
                    for alias in child.names:
                        sub = f"{target}.{alias.name}"
                        if sub in MODULES:
                            found.append(Import(module, sub, None, child.lineno))
                        else:
                            found.append(Import(module, target, alias.name, child.lineno))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] in PACKAGES:
                        found.append(Import(module, alias.name, None, child.lineno))
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


IMPORTS = [imp for module, path in MODULES.items() for imp in _imports(module, path)]


def _owner(dotted: str) -> str:
    """The package a module belongs to (a package is its own owner)."""
    path = MODULES.get(dotted)
    if path is not None and path.name == "__init__.py":
        return dotted
    return dotted.rpartition(".")[0]


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_imports() -> list[str]:
    """Imports of a private module or name from outside the package that owns it."""
    bad = []
    for imp in IMPORTS:
        if imp.target.split(".")[0] not in PRIVATE_CHECKED:
            continue
        parts = imp.target.split(".")
        private_at = next((i for i, part in enumerate(parts) if _is_private(part)), None)
        if private_at is not None:
            owner = ".".join(parts[:private_at])
        elif imp.name is not None and _is_private(imp.name):
            owner = _owner(imp.target)
        else:
            continue
        if not _inside(imp.importer, owner):
            what = imp.target + (f".{imp.name}" if imp.name else "")
            bad.append(f"{imp.importer}:{imp.line} imports {what} (private to {owner})")
    return bad


def import_cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module in the import graph."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.target in MODULES and imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        # iterative Tarjan: (node, iterator over its successors)
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_the_import_graph_is_built_from_the_code():
    """The checks below see the real graph: known edges are in it, type-only ones are not."""
    edges = {(imp.importer, imp.target) for imp in IMPORTS}
    assert ("storage.table.table", "storage.region.region") in edges
    assert ("storage.wal.open_writer", "storage.wal.segments") in edges
    assert ("storage.region.load_stage", "storage.region.load_commit") in edges
    assert ("jobs._bulk", "storage.engine") in edges
    # RemoteTable names its connection through a protocol: the client imports it, not the reverse
    assert ("storage.server.remote_table", "storage.server.link") in edges
    assert ("storage.server.client", "storage.server.remote_table") in edges
    assert ("storage.server.remote_table", "storage.server.client") not in edges
    assert len(MODULES) > 150


def test_long_modules_are_named():
    """Past LONG_MODULE lines a module is named in a warning (is it one concept?); past
    TOO_LONG_MODULE the check fails."""
    long = {
        str(path.relative_to(REPO)): n
        for path in MODULES.values()
        if (n := len(path.read_text().splitlines())) > LONG_MODULE
    }
    for name, n in sorted(long.items()):
        warnings.warn(f"{name} has {n} lines: does it hold one concept?", stacklevel=1)
    too_long = {name: n for name, n in long.items() if n > TOO_LONG_MODULE}
    assert not too_long, f"modules over {TOO_LONG_MODULE} lines: {too_long}"


def test_no_import_circle():
    """No circle, type-only imports included (see the module docstring for how one is broken)."""
    assert import_cycles() == []


def test_type_only_imports_are_edges(tmp_path):
    """An import under ``if TYPE_CHECKING:`` is an edge of the graph like any other."""
    source = tmp_path / "typed.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from .manifest import RegionInfo\n"
        "    from storage.table import table\n"
    )
    found = {(imp.target, imp.name) for imp in _imports("storage.region.typed", source)}
    assert ("storage.region.manifest", "RegionInfo") in found
    assert ("storage.table.table", None) in found


def test_layers_import_downward_only():
    upward = [
        f"{imp.importer}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if imp.target.split(".")[0] in LAYERS.get(imp.importer.split(".")[0], ())
    ]
    assert upward == []


def test_no_private_name_is_imported_from_another_package():
    assert private_imports() == []


def sibling_private_imports() -> list[str]:
    """Imports of a private name (``from .x import _y``) from any other module."""
    return [
        f"{imp.importer}:{imp.line} imports {imp.target}.{imp.name}"
        for imp in IMPORTS
        if imp.name is not None and _is_private(imp.name) and imp.target != imp.importer
    ]


def test_no_private_name_is_imported_from_another_module():
    """A name that another module imports is its module's API: public there (no ``_``)."""
    assert sibling_private_imports() == []


def test_the_checks_catch_what_they_look_for(tmp_path):
    """The cycle and private-name checks report a planted circle and a planted private import."""
    global IMPORTS
    saved = IMPORTS
    try:
        IMPORTS = saved + [
            Import("storage.cells", "storage.errors", "X", 1),
            Import("storage.errors", "storage.cells", "Y", 1),
            Import("connector.scanning", "storage.kernels.merge", "_hidden", 1),
            Import("jobs.cli", "storage.storefile._block", "Block", 1),
            Import("storage.wal.reader", "storage.wal.format", "_HEADER", 7),
            Import("storage.storefile.reader", "storage.storefile._block", "Block", 8),
        ]
        assert ["storage.cells", "storage.errors"] in import_cycles()
        bad = private_imports()
        assert any("storage.kernels.merge._hidden" in b for b in bad)
        assert any("storage.storefile._block.Block" in b for b in bad)
        siblings = sibling_private_imports()
        assert "storage.wal.reader:7 imports storage.wal.format._HEADER" in siblings
        assert not [b for b in siblings if b.startswith("storage.storefile.reader:8")]  # a private module, public name
    finally:
        IMPORTS = saved


def engine_internal_imports() -> list[str]:
    """Imports by connector/ or jobs/ of a storage module that is not one of the engine's public ones."""
    return [
        f"{imp.importer}:{imp.line} imports {imp.target}" + (f".{imp.name}" if imp.name else "")
        for imp in IMPORTS
        if imp.importer.split(".")[0] in ENGINE_CALLERS
        and imp.target.split(".")[0] == "storage"
        and imp.target not in ENGINE_PUBLIC
    ]


def test_connector_and_jobs_import_only_the_engines_public_modules():
    """connector/ and jobs/ reach the engine through storage, storage.keys, storage.filters and
    storage.engine only, so the engine's internals can change without breaking them."""
    assert engine_internal_imports() == []


def test_the_public_module_check_catches_a_deeper_import():
    """An import of an engine internal by the connector or a job is reported; the same import
    inside storage, and imports of the public modules, are not."""
    global IMPORTS
    saved = IMPORTS
    try:
        IMPORTS = saved + [
            Import("connector.scanning", "storage.read.batch_scan", "BatchScan", 1),
            Import("jobs.row_counter", "storage.kernels", None, 2),
            Import("storage.table.scans", "storage.read.batch_scan", "BatchScan", 3),
            Import("connector.scanning", "storage.engine", "pin_table", 4),
            Import("jobs.cli", "storage", "connect", 5),
        ]
        bad = engine_internal_imports()
        assert "connector.scanning:1 imports storage.read.batch_scan.BatchScan" in bad
        assert "jobs.row_counter:2 imports storage.kernels" in bad
        assert not [b for b in bad if b.startswith(("storage.", "connector.scanning:4", "jobs.cli:5"))]
    finally:
        IMPORTS = saved


def storage_imports_of(layers: tuple[str, ...] = ("connector", "jobs")) -> list[str]:
    """Every import of a storage module or name by the given layers, one line each."""
    return sorted(
        f"{imp.importer}: {imp.target}" + (f" import {imp.name}" if imp.name else "")
        for imp in IMPORTS
        if imp.importer.split(".")[0] in layers and imp.target.split(".")[0] == "storage"
    )


if __name__ == "__main__":
    lines = storage_imports_of()
    print("\n".join(lines))
    print(f"{len(lines)} imports of storage by connector/ and jobs/", file=sys.stderr)
