"""Every runnable example of README.md and docs/*.md runs as written (blocks tagged
``run``: see tests/support/doc_examples.py); the documents whose examples start Spark or
the demo (``run slow``) run in the campaign (``make soak-test``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.doc_examples import documents, parse, run

DOCS = documents()
FAST = sorted(name for name, examples in DOCS.items() if not any(e.slow for e in examples))
SLOW = sorted(set(DOCS) - set(FAST))


def test_a_runnable_block_is_told_by_its_info_string() -> None:
    text = "\n".join([
        "# t", "```python run", "x = 1", "```", "```python", "sketch(...)", "```",
        "````sh run slow", "echo ```", "````", "```", "layout", "```", "```sql run", "no", "```"])
    found = parse(text, "t.md")
    assert [(e.line, e.language, sorted(e.tags), e.code) for e in found] == [
        (2, "python", ["run"], "x = 1"), (8, "sh", ["run", "slow"], "echo ```")]


def test_the_format_documents_have_runnable_examples() -> None:
    for name in ("docs/FORMATS.md", "docs/ICEBERG.md"):
        assert name in FAST, name
    assert "README.md" in SLOW   # the tour: the demo's tables, ingested with Spark


@pytest.mark.parametrize("document", FAST)
def test_the_examples_of_a_document_run_as_written(document: str, tmp_path: Path) -> None:
    run(DOCS[document], tmp_path)


@pytest.mark.campaign
@pytest.mark.parametrize("document", SLOW)
def test_the_examples_that_start_spark_run_as_written(document: str, tmp_path: Path) -> None:
    run(DOCS[document], tmp_path)
