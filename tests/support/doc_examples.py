"""The runnable examples of the project's Markdown (``README.md``, ``docs/*.md``).

A fenced block whose info string names ``run`` after its language runs as written:
```` ```python run ```` in one Python namespace per document, ```` ```sh run ```` with bash
(``-e``: a failing command fails the example), in the order of their document, in one
working directory of the document's own (so relative paths in an example are the reader's
own folder), as a reader follows it top to bottom. ``run slow`` marks a block that starts
Spark or the demo: only the campaign variant (``make soak-test``) runs those documents.
Any other block (a sketch with placeholders, a layout, option lines) is prose. A document
opts in block by block, so the runner covers every document's examples as they are tagged.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
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


def parse(text: str, document: str) -> list[Example]:
    """The runnable blocks of one Markdown text, in order."""
    found: list[Example] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index].strip())
        if not match:
            index += 1
            continue
        fence, info = match.group(1), match.group(2).split()
        end = next((j for j in range(index + 1, len(lines))
                    if lines[j].strip() == fence), len(lines))
        if len(info) >= 2 and "run" in info[1:] and info[0] in LANGUAGES:
            found.append(Example(document, index + 1, LANGUAGES[info[0]],
                                 frozenset(info[1:]), "\n".join(lines[index + 1:end])))
        index = end + 1
    return found


def documents(root: Path = ROOT) -> dict[str, list[Example]]:
    """Every document with runnable examples: its path relative to `root` -> examples."""
    paths = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    found = {}
    for path in paths:
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
