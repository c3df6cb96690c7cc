"""Every relative link of README.md and docs/*.md reaches a file of the repository and,
with a `#fragment`, a heading of that file (GitHub's anchors)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.doc_examples import ROOT, paths

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$")
_FENCE = re.compile(r"^\s*(`{3,})")


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown text's headings (code blocks left out)."""
    found: set[str] = set()
    fence = ""
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if opened and (not fence or opened.group(1) == fence):
            fence = "" if fence else opened.group(1)
            continue
        heading = _HEADING.match(line)
        if heading and not fence:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            anchor, n = slug, 0
            while anchor in found:
                n += 1
                anchor = f"{slug}-{n}"
            found.add(anchor)
    return found


def broken(document: Path) -> list[str]:
    """The links of one document that reach no file or no heading."""
    text = document.read_text()
    found = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        name, _, fragment = target.partition("#")
        path = (document.parent / name).resolve() if name else document
        if not path.exists():
            found.append(f"{target}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path.read_text()):
            found.append(f"{target}: no such heading")
    return found


def test_the_anchors_are_githubs() -> None:
    text = "# A `b`: c's d\n```\n# not a heading\n```\n## Values: x, y\n## Values: x, y\n"
    assert anchors(text) == {"a-b-cs-d", "values-x-y", "values-x-y-1"}


def test_every_relative_link_reaches_its_file_and_heading() -> None:
    found = [f"{path.relative_to(ROOT)}: {link}" for path in paths() for link in broken(path)]
    assert found == [], "\n".join(found)


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Top\n[ok](#top) [x](b.md) [y](a.md#nowhere)\n")
    assert broken(tmp_path / "a.md") == ["b.md: no such file", "a.md#nowhere: no such heading"]
