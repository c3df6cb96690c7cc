"""One definition of each shared constant: no two modules of markerstore/ or errortable/
define a module-level UPPER_CASE string or tuple constant with the same value, except the
few listed here (a list to shrink)."""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parent.parent

# value -> the definitions allowed to repeat it, each with why it is still there.
KNOWN: dict[object, set[str]] = {
    # two different things that are spelled alike: the context key and the reason
    "check": {"errortable/capture/records.py:CHECK", "errortable/capture/records.py:CHECK_REASON"},
    # the Spark data source's format name and the name pyiceberg's configuration knows
    # the Iceberg catalog of a published table by
    "markerstore": {"markerstore/spark/source.py:NAME",
                    "markerstore/formats/iceberg_catalog.py:CATALOG_NAME"},
}


def constants() -> dict[object, set[str]]:
    found: dict[object, set[str]] = defaultdict(set)
    for package in ("markerstore", "errortable"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:
                target = (node.targets[0] if isinstance(node, ast.Assign) else
                          node.target if isinstance(node, ast.AnnAssign) else None)
                if not isinstance(target, ast.Name) or not target.id.isupper():
                    continue
                value = getattr(node, "value", None)
                if not isinstance(value, (ast.Constant, ast.Tuple)):
                    continue
                try:
                    literal = ast.literal_eval(value)
                except ValueError:
                    continue
                if isinstance(literal, str) and len(literal) > 1 or (
                        isinstance(literal, tuple) and len(literal) > 1
                        and all(isinstance(item, str) for item in literal)):
                    found[literal].add(f"{path.relative_to(ROOT)}:{target.id}")
    return found


def test_each_shared_constant_is_defined_once() -> None:
    repeated = {value: places for value, places in constants().items() if len(places) > 1}
    unexpected = {value: places for value, places in repeated.items()
                  if not places <= KNOWN.get(value, set())}
    assert unexpected == {}, f"constants defined twice (import the one): {unexpected}"
