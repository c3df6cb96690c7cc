"""The import graph of markerstore/ and errortable/: the core imports nothing above it, and
no import cycle is added.

A small AST walk (no module is imported): every ``import`` and ``from ... import``
anywhere in a module counts, at the top, inside a function (lazy) or under
``if TYPE_CHECKING``. ``from a.b import c`` is an import of the module ``a.b.c`` when
that module exists, else of ``a.b``.

Run it as a script (``python tests/test_layers.py``) to print today's cycles.
"""

from __future__ import annotations

import ast
import pathlib
import sys
from collections.abc import Iterable

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("markerstore", "errortable")

# The core of DESIGN.md's layer rule checked here: these import nothing above them.
CORE = ("markerstore.storage", "markerstore.timeline", "markerstore.markers",
        "markerstore.paths", "markerstore.datafiles", "markerstore.config",
        "markerstore.option_values", "markerstore.values",
        "markerstore.errors", "markerstore.tablefile", "markerstore.arrow_avro",
        "markerstore.render", "markerstore.snapshot", "markerstore.paths_arrow",
        "markerstore._optional",
        "markerstore.metrics", "markerstore.duck", "markerstore.backoff")
# What is above the core. `markerstore` itself is the package facade (its __init__).
ABOVE = ("markerstore.table", "markerstore.formats", "markerstore.server", "markerstore.sql",
         "markerstore.commit",
         "markerstore.spark", "markerstore.ingest", "markerstore.cli", "markerstore.audit",
         "errortable")

# Text to values (markerstore.values) sits low in the core: ingest and errortable read
# through it, and it imports only itself and these storage-free modules of the core.
VALUES = "markerstore.values"
VALUES_MAY_IMPORT = ("markerstore.config", "markerstore.option_values", "markerstore.errors",
                     "markerstore.duck")

# errortable's rooms, lowest first: a module imports only its own room, a room below it
# or the package's base (its options, metrics and the ErrorRecord schema). The package
# facade (errortable/__init__.py) names every room.
ERRORTABLE_BASE = ("errortable.config", "errortable.metrics", "errortable.schema")
ERRORTABLE_ROOMS = ("errortable.capture", "errortable.writing", "errortable.reading",
                    "errortable.ops")

# Today's import cycles (strongly connected components), a list to shrink: a change may
# break a cycle or take a module out of one, never add a module to one or start a new one.
KNOWN_CYCLES: list[frozenset[str]] = [
]


def module_files() -> dict[str, pathlib.Path]:
    """Every module of the project packages by dotted name (a package by its name)."""
    found: dict[str, pathlib.Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _base(module: str, path: pathlib.Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[:len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def imports_of(module: str, path: pathlib.Path, known: Iterable[str]) -> set[str]:
    """The project modules `module` imports, anywhere in its source."""
    names = set(known)
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in names else base)
    return {t for t in targets if t in names and t != module}


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imports_of(name, path, files) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _within(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """`core -> above` for each import from the core to a layer above it, and from the
    core facade `markerstore.table` to anything above it."""
    facade = [f"{source} -> {target}" for source, targets in graph.items()
              if source == "markerstore.table"
              for target in targets
              if (_within(target, ABOVE) and target != source) or target == "markerstore"]
    return sorted(facade + [f"{source} -> {target}" for source, targets in graph.items()
                            if _within(source, CORE)
                            for target in targets
                            if _within(target, ABOVE) or target == "markerstore"])


def test_the_core_imports_nothing_above_it() -> None:
    assert upward_imports(import_graph()) == []


def test_every_module_is_in_a_layer() -> None:
    """Each module of the project is in CORE or ABOVE (or is a package facade)."""
    unplaced = [name for name in module_files() if name not in PACKAGES
                and not _within(name, CORE) and not _within(name, ABOVE)]
    assert unplaced == []


def values_imports(graph: dict[str, set[str]]) -> list[str]:
    """`values -> target` for each import of markerstore.values beyond itself and the
    storage-free modules it may use."""
    return sorted(f"{source} -> {target}" for source, targets in graph.items()
                  if _within(source, (VALUES,)) for target in targets
                  if not _within(target, (VALUES, *VALUES_MAY_IMPORT)))


def _room(module: str) -> int | None:
    """The floor of an errortable module (0: the base), None outside errortable's rooms."""
    if _within(module, ERRORTABLE_BASE):
        return 0
    for floor, room in enumerate(ERRORTABLE_ROOMS, start=1):
        if _within(module, (room,)):
            return floor
    return None


def errortable_room_imports(graph: dict[str, set[str]]) -> list[str]:
    """`source -> target` for each import of an errortable module by one on a lower floor
    (or by the base)."""
    found = []
    for source, targets in graph.items():
        floor = _room(source)
        if floor is None:
            continue
        found += [f"{source} -> {target}" for target in targets
                  if (_room(target) or 0) > floor]
    return sorted(found)


def test_values_imports_only_itself_and_the_storage_free_core() -> None:
    graph = import_graph()
    assert values_imports(graph) == []
    assert {m for m in graph if m.startswith("errortable.")} <= {
        m for m in graph if _room(m) is not None}, "an errortable module outside its rooms"


def test_errortable_rooms_import_only_down() -> None:
    assert errortable_room_imports(import_graph()) == []


def test_the_room_check_sees_an_upward_import() -> None:
    graph = {"errortable.capture.records": {"errortable.writing.files", "errortable.schema"},
             "errortable.schema": {"errortable.ops.replays"},
             "errortable.ops.replays": {"errortable.reading.reader"},
             "markerstore.values.cast": {"markerstore.duck", "markerstore.storage"}}
    assert errortable_room_imports(graph) == [
        "errortable.capture.records -> errortable.writing.files",
        "errortable.schema -> errortable.ops.replays"]
    assert values_imports(graph) == ["markerstore.values.cast -> markerstore.storage"]


def test_no_new_import_cycle() -> None:
    new = [sorted(c) for c in cycles(import_graph())
           if not any(c <= known for known in KNOWN_CYCLES)]
    assert new == [], "a new import cycle (or a module added to a known one)"


def test_the_walk_sees_lazy_type_checking_and_relative_imports(tmp_path: pathlib.Path) -> None:
    source = tmp_path / "__init__.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from pkg.b import Thing\n"
                      "def f():\n    import pkg.c\n    from . import d\n    from .e import x\n")
    known = {"pkg", "pkg.b", "pkg.c", "pkg.d", "pkg.e"}
    assert imports_of("pkg", source, known) == {"pkg.b", "pkg.c", "pkg.d", "pkg.e"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


def test_the_check_sees_an_upward_import_of_the_table() -> None:
    graph = {"markerstore.table": {"markerstore.sql.views", "markerstore.storage"},
             "markerstore.storage.fs": {"markerstore.commit"}}
    assert upward_imports(graph) == ["markerstore.storage.fs -> markerstore.commit",
                                     "markerstore.table -> markerstore.sql.views"]


if __name__ == "__main__":
    graph = import_graph()
    for cycle in sorted(cycles(graph), key=len, reverse=True):
        print(f"{len(cycle)}: {sorted(cycle)}")
    print("upward imports from the core:", upward_imports(graph) or "none")
    print("errortable rooms importing up:", errortable_room_imports(graph) or "none")
    sys.exit(0)
