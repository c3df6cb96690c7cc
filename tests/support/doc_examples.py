"""The runnable examples of the project's Markdown (``README.md``, ``docs/*.md``).

A fenced block whose info string names ``run`` after its language runs as written:
```` ```python run ```` in one Python namespace per document, ```` ```sh run ```` with bash
(``-e``: a failing command fails the example), in the order of their document, in one
working directory of the document's own (so relative paths in an example are the reader's
own folder), as a reader follows it top to bottom. Tags after ``run``:

- ``spark``: a Python block that uses a Spark session; it gets the active one
  (``SparkSession.builder.getOrCreate()`` in the example returns the test session's own,
  so the examples share one session with the rest of the suite);
- ``slow``: a block that starts Spark in a process of its own (``markerstore ingest``,
  ``markerstore demo``): ``make test`` runs the other blocks of the document, the campaign
  (``make soak-test``) runs the document whole. So a block that is not slow must not need
  what a slow block made.

A Python or shell block that cannot run here (S3, a cluster, placeholders) says why in its
info string: ```` ```python norun: needs an S3 bucket ````. Any other block (no language: a
layout, a syntax, option lines; JSON, SQL) is prose. :func:`unmarked` lists the Python and
shell blocks that say neither, so every example is run or says why not.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^(`{3,})([^`]*)$")
LANGUAGES = {"python": "python", "py": "python", "sh": "sh", "bash": "sh", "console": "sh"}


@dataclass(frozen=True)
class Example:
    """One runnable block: where it is, its language (python or sh), its tags, its code."""

    document: str
    line: int
    language: str
    tags: frozenset[str]
    code: str

    @property
    def label(self) -> str:
        return f"{self.document}:{self.line}"

    @property
    def slow(self) -> bool:
        return "slow" in self.tags

    @property
    def spark(self) -> bool:
        return "spark" in self.tags


def _fences(lines: list[str]) -> Iterator[tuple[int, list[str], int]]:
    """Each fenced block of Markdown lines: its opening line's index, its info string's
    words, and the index of its closing fence."""
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index].strip())
        if not match:
            index += 1
            continue
        fence = match.group(1)
        end = next((j for j in range(index + 1, len(lines))
                    if lines[j].strip() == fence), len(lines))
        yield index, match.group(2).split(), end
        index = end + 1


def parse(text: str, document: str) -> list[Example]:
    """The runnable blocks of one Markdown text, in order."""
    lines = text.splitlines()
    return [Example(document, index + 1, LANGUAGES[info[0]], frozenset(info[1:]),
                    "\n".join(lines[index + 1:end]))
            for index, info, end in _fences(lines)
            if len(info) >= 2 and "run" in info[1:] and info[0] in LANGUAGES]


def unmarked(text: str, document: str) -> list[str]:
    """The Python and shell blocks that neither run nor say why not (``norun: reason``)."""
    return [f"{document}:{index + 1} ({' '.join(info)})"
            for index, info, _ in _fences(text.splitlines())
            if info and info[0] in LANGUAGES and "run" not in info[1:]
            and not (len(info) > 2 and info[1] == "norun:")]


def paths(root: Path = ROOT) -> list[Path]:
    """The project's Markdown: the README and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def documents(root: Path = ROOT) -> dict[str, list[Example]]:
    """Every document with runnable examples: its path relative to `root` -> examples."""
    found = {}
    for path in paths(root):
        name = str(path.relative_to(root))
        examples = parse(path.read_text(), name)
        if examples:
            found[name] = examples
    return found


def run(examples: list[Example], folder: Path) -> None:
    """Run one document's examples in order in `folder` (Python in one namespace, shell
    with bash -e); an example that fails raises AssertionError naming its line."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    env = {**os.environ,
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    here = Path.cwd()
    os.chdir(folder)
    try:
        for example in examples:
            if example.language == "python":
                exec(compile(example.code, example.label, "exec"), namespace)
                continue
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", example.code],
                                  cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=900)
            assert done.returncode == 0, (f"{example.label} failed ({done.returncode}):\n"
                                          f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    finally:
        os.chdir(here)
