"""Every runnable example of README.md and docs/*.md runs as written (blocks tagged
``run``: see tests/support/doc_examples.py). ``make test`` runs each document's examples
but those that start Spark in a process of their own (``run slow``), the Spark ones in the
suite's one session; the campaign (``make soak-test``) runs those documents whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.doc_examples import ROOT, documents, parse, paths, run, unmarked

DOCS = documents()
SLOW = sorted(name for name, examples in DOCS.items() if any(e.slow for e in examples))
FAST = {name: [e for e in examples if not e.slow] for name, examples in DOCS.items()}
FAST = {name: examples for name, examples in sorted(FAST.items()) if examples}


def _fast(name: str) -> object:
    spark = any(e.spark for e in FAST[name])
    return pytest.param(name, marks=[pytest.mark.spark] if spark else [], id=name)


def test_a_runnable_block_is_told_by_its_info_string() -> None:
    text = "\n".join([
        "# t", "```python run", "x = 1", "```", "```python norun: needs S3", "sketch(...)",
        "```", "````sh run slow", "echo ```", "````", "```", "layout", "```", "```sql run",
        "no", "```", "```python run spark", "spark", "```"])
    found = parse(text, "t.md")
    assert [(e.line, e.language, sorted(e.tags), e.code, e.spark) for e in found] == [
        (2, "python", ["run"], "x = 1", False), (8, "sh", ["run", "slow"], "echo ```", False),
        (17, "python", ["run", "spark"], "spark", True)]
    assert unmarked(text, "t.md") == []


def test_a_block_that_neither_runs_nor_says_why_is_found() -> None:
    text = "\n".join(["```python", "x()", "```", "```sh norun:", "y", "```",
                      "```python norun: needs a cluster", "z()", "```", "```json", "{}", "```"])
    assert unmarked(text, "t.md") == ["t.md:1 (python)", "t.md:4 (sh norun:)"]


def test_every_python_and_shell_example_runs_or_says_why_not() -> None:
    found = [line for path in paths() for line in
             unmarked(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "blocks to tag `run` or `norun: <why>`:\n" + "\n".join(found)


def test_the_front_page_and_the_reference_pages_have_runnable_examples() -> None:
    for name in ("README.md", "docs/API.md", "docs/CLI.md", "docs/INGEST.md",
                 "docs/FORMATS.md", "docs/ICEBERG.md"):
        assert name in FAST, name
    assert "README.md" in SLOW   # the tour's ingest with Spark, and the demo


@pytest.mark.parametrize("document", [_fast(name) for name in FAST])
def test_the_examples_of_a_document_run_as_written(document: str, tmp_path: Path,
                                                   request: pytest.FixtureRequest) -> None:
    if any(e.spark for e in FAST[document]):
        _shared_session(request)
    run(FAST[document], tmp_path)


@pytest.mark.campaign
@pytest.mark.parametrize("document", SLOW)
def test_the_examples_that_start_spark_run_as_written(document: str, tmp_path: Path,
                                                       request: pytest.FixtureRequest) -> None:
    if any(e.spark for e in DOCS[document]):
        _shared_session(request)
    run(DOCS[document], tmp_path)


def _shared_session(request: pytest.FixtureRequest) -> None:
    """The suite's Spark session, which the examples' getOrCreate() returns, with
    ``format("markerstore")`` registered: the examples' ``import markerstore.spark``
    registers it with the active session, but in this process the package may have been
    imported before the session started."""
    import markerstore.spark

    markerstore.spark.register(request.getfixturevalue("spark"))
