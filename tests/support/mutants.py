"""Mutants of the package, for tests that prove a check can fail: a copy of `markerstore`
and `errortable` in a folder, with one change, first on ``PYTHONPATH`` of the Spark
session's Python workers (:func:`workers_import`), or of a child process.

``python -m tests.support.mutants FOLDER`` writes the mutant and prints the folder."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("markerstore", "errortable")

# The error file writer drops the first error record of every batch it is given, while
# every count (the reasons, the file's rows, what it returns) still includes it: every
# counter the writers keep says the record was stored.
DROP_FIRST_ERROR_RECORD = (
    ("errortable/writing/taskwriter.py",
     "        return writer.write(self._counted(records))\n",
     "        counted = list(self._counted(records))\n"
     "        writer.write(counted[1:])\n"
     "        writer.rows += 1\n"
     "        return len(counted)\n"),
    ("errortable/writing/taskwriter.py",
     "        return writer.write_arrow(table)\n",
     "        writer.write_arrow(table.slice(1))\n"
     "        writer.rows += 1\n"
     "        return table.num_rows\n"),
)


def write_mutant(folder: Path, edits: tuple[tuple[str, str, str], ...] = DROP_FIRST_ERROR_RECORD
                 ) -> Path:
    """Copy the packages into `folder` and apply `edits` (file, old text, new text); each
    old text must occur exactly once, so a change to the code fails here, loudly."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, folder / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    for name, old, new in edits:
        path = folder / name
        text = path.read_text()
        if text.count(old) != 1:
            raise AssertionError(f"{name} no longer holds the text the mutant replaces: {old!r}")
        path.write_text(text.replace(old, new))
    return folder


@contextmanager
def workers_import(spark: Any, folder: Path) -> Iterator[None]:
    """Python functions that Spark runs inside this block import the packages from
    `folder`: the session's environment for Python workers (which Spark copies into each
    function it runs; workers with another environment come from another daemon) puts
    `folder` on PYTHONPATH, and PYTHONSAFEPATH keeps the daemon's working directory (the
    repository, for a test run) from coming first. The driver keeps its own code."""
    environment = spark.sparkContext.environment
    saved = {k: environment.get(k) for k in ("PYTHONPATH", "PYTHONSAFEPATH")}
    environment["PYTHONPATH"] = str(folder)
    environment["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                environment.pop(key, None)
            else:
                environment[key] = value


if __name__ == "__main__":
    print(write_mutant(Path(sys.argv[1])))
