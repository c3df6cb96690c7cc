"""The ingest against Spark's own readers over a corpus built from the specifications
(tests/support/spec_corpus.py): Spark reads each corpus with the same schema in
PERMISSIVE mode (`multiLine` for CSV, whose records may span lines), the ingest commits
it, and each source record's outcome is compared: the same row, or a corrupt record in
Spark and an error record in the ingest. Every case where they differ is in the table of
docs/INGEST.md ("Where the ingest and Spark's readers differ"), with both outcomes
as this test renders them, and no other case is: the docs cannot drift.

The ingest's outcomes are read back from the committed files (data rows by their `id`,
error rows by their source file), and each corpus checks the invariant per source
record: records in the corpus = committed rows + committed error records."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from markerstore import Table
from markerstore.ingest.pipeline import ingest
from tests.support.readback import data_rows, error_rows
from tests.support.spec_corpus import Case, Corpus, corpora

pytestmark = pytest.mark.spark

DOC = Path(__file__).resolve().parents[2] / "docs" / "INGEST.md"
SECTION = "## Where the ingest and Spark's readers differ"
CORRUPT = "_corrupt_record"
Outcome = tuple[Any, ...]  # ("row", values...) or ("bad", reason)


@dataclass
class Outcomes:
    """What Spark and the ingest made of each case of a corpus."""

    corpus: Corpus
    spark: dict[str, list[Outcome]] = field(default_factory=dict)
    ours: dict[str, list[Outcome]] = field(default_factory=dict)
    unattributed: list[Outcome] = field(default_factory=list)
    result: Any = None


def _spark_read(spark: Any, corpus: Corpus, folder: Path) -> dict[str, list[Outcome]]:
    reader = (spark.read.schema(f"{corpus.ddl}, {CORRUPT} STRING")
              .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT))
    if corpus.fmt == "csv":  # RFC 4180: records span lines, a quote escapes a quote
        reader = (reader.option("header", "true").option("multiLine", "true")
                  .option("escape", '"'))
    for key, value in corpus.options.items():
        reader = reader.option(key, value)
    frame = getattr(reader, corpus.fmt)(str(folder)).select("*", "_metadata.file_path")
    found: dict[str, list[Outcome]] = {c.name: [] for c in corpus.cases}
    shared: list[tuple[Outcome, str | None]] = []  # the shared file's rows, in order
    for row in frame.collect():
        values = row.asDict()
        path = values.pop("file_path")
        corrupt = values.pop(CORRUPT)
        outcome = ("bad", "corrupt") if corrupt is not None else ("row", *values.values())
        if path.endswith("/" + corpus.file_name(None)):
            shared.append((outcome, corrupt))
        else:
            found[corpus.case_at(path, None).name].append(outcome)
    _align(corpus, shared, found)
    return found


def _align(corpus: Corpus, rows: list[tuple[Outcome, str | None]],
           found: dict[str, list[Outcome]]) -> None:
    """The shared file's rows are its records in order, one each (Spark reads a file in
    order): checked by the id of every row and the text of every corrupt record."""
    cases = corpus.shared
    if len(rows) != len(cases):
        first = next((c.name for c, (o, _) in zip(cases, rows)
                      if o[0] == "row" and c.ids and o[1] != c.ids[0]), None)
        raise AssertionError(
            f"{corpus.name}: Spark read {len(rows)} rows from the shared file of "
            f"{len(cases)} records, the first out of step at case {first}: a case there "
            "is not one record to Spark (make it `alone`)")
    for case, (outcome, corrupt) in zip(cases, rows, strict=True):
        if outcome[0] == "row":
            assert not case.ids or outcome[1] == case.ids[0], (corpus.name, case.name, outcome)
        else:
            assert corrupt is not None and _text(corpus, corrupt) == _text(
                corpus, case.data.decode("utf-8", "replace")), (corpus.name, case.name)
        found[case.name].append(outcome)


def _text(corpus: Corpus, record: str) -> str:
    """A record's text as both sides hold it (bytes that are not UTF-8 replaced: Spark
    replaces a bad sequence by one U+FFFD, Python by one per byte)."""
    return record.replace("\ufffd", "").rstrip("\r\n")


def _ingest(spark: Any, corpus: Corpus, folder: Path, table: str) -> Outcomes:
    out = Outcomes(corpus, ours={c.name: [] for c in corpus.cases})
    out.result = ingest(str(folder), table, schema=corpus.ddl, fmt=corpus.fmt, spark=spark,
                        progress=False, markers="direct", options=corpus.options or None)
    instant = out.result.commit.instant
    by_id = corpus.case_of_id()
    for row in data_rows(table, instant=instant).to_pylist():
        case = by_id.get(row.get("id"))
        target = out.unattributed if case is None else out.ours[case.name]
        target.append(("row", *row.values()))
    errors = error_rows(table, instant=instant, columns="source_file, source_line, reason")
    for source, line, reason in zip(*errors.to_pydict().values(), strict=True):
        out.ours[corpus.case_at(source, line).name].append(("bad", reason))
    return out


def run_corpora(spark: Any, corpora: list[Corpus], root: Path) -> list[Outcomes]:
    """Each corpus written under `root`, ingested, and read by Spark's own reader."""
    found = []
    for corpus in corpora:
        folder = corpus.write(root / "source" / corpus.name)
        result = _ingest(spark, corpus, folder, str(root / "tables" / corpus.name))
        result.spark = _spark_read(spark, corpus, folder)
        found.append(result)
    return found


def undocumented(found: dict[str, tuple[str, str]], docs: dict[str, tuple[str, str]],
                 outcomes: list[Outcomes]) -> tuple[list[str], list[str]]:
    """(the table rows of the differences `docs` does not say so, as they would read; the
    documented cases that no longer differ)."""
    cases = {f"{o.corpus.name}/{c.name}": c for o in outcomes for c in o.corpus.cases}
    missing = [f"| `{name}` | `{_input(cases[name])}` | `{spark}` | `{ours}` | |"
               for name, (spark, ours) in sorted(found.items()) if docs.get(name) != (spark, ours)]
    return missing, sorted(set(docs) - set(found))


@pytest.fixture(scope="module")
def outcomes(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[Outcomes]:
    return run_corpora(spark, corpora(), tmp_path_factory.mktemp("differential"))


# --- rendering, as the docs show it ------------------------------------------------------------
def _value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value) if not math.isnan(value) else "nan"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = json.dumps(value)
        return text if len(text) <= 24 else f"{text[:16]}…({len(value)} chars)"
    return str(value)


def _render(outcome: Outcome, names: list[str]) -> str:
    if outcome[0] == "bad":
        return "corrupt record" if outcome[1] == "corrupt" else f"error ({outcome[1]})"
    shown = [f"{n}={_value(v)}" for n, v in zip(names, outcome[1:], strict=True)
             if v is not None and n != "id"]
    if len(shown) > 4:
        return f"row ({len(shown)} values)"
    return "row " + " ".join(shown) if shown else "row (nulls)"


def render(outcomes: Iterable[Outcome], names: list[str]) -> str:
    counted = Counter(_render(o, names) for o in outcomes)
    if not counted:
        return "nothing"
    return "; ".join(text if n == 1 else f"{n}× {text}" for text, n in sorted(counted.items()))


def _same(spark: list[Outcome], ours: list[Outcome]) -> bool:
    def canonical(items: list[Outcome]) -> list[str]:
        return sorted("bad" if o[0] == "bad" else repr(tuple(
            "nan" if isinstance(v, float) and math.isnan(v) else v for v in o)) for o in items)
    return canonical(spark) == canonical(ours)


def differences(found: list[Outcomes]) -> dict[str, tuple[str, str]]:
    """`corpus/case` -> (Spark's outcome, the ingest's), for every case where they differ."""
    diff = {}
    for out in found:
        names = [f.strip().split(" ")[0] for f in out.corpus.ddl.split(",")]
        for case in out.corpus.cases:
            spark, ours = out.spark[case.name], out.ours[case.name]
            if not _same(spark, ours):
                diff[f"{out.corpus.name}/{case.name}"] = (render(spark, names),
                                                          render(ours, names))
    return diff


def documented() -> dict[str, tuple[str, str]]:
    """The table of docs/INGEST.md's section: case -> (Spark, ingest)."""
    return documented_in()


def documented_in(heading: str = SECTION, ends: str = "\n## ") -> dict[str, tuple[str, str]]:
    """The table of a section of docs/INGEST.md (from `heading` to `ends`): case ->
    (Spark, ingest)."""
    text = DOC.read_text()
    assert heading in text, f"docs/INGEST.md has no section {heading!r}"
    section = text.split(heading, 1)[1].split(ends, 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[2].strip("`"), cells[3].strip("`"))
    return rows


def _input(case: Case) -> str:
    text = case.data.decode("utf-8", "backslashreplace")
    text = json.dumps(text)[1:-1].replace("|", "\\|").replace("`", "'")
    return text if len(text) <= 48 else text[:40] + f"…({len(case.data)} bytes)"


# --- the tests ----------------------------------------------------------------------------------
def test_every_difference_from_spark_is_documented(outcomes: list[Outcomes]) -> None:
    missing, stale = undocumented(differences(outcomes), documented(), outcomes)
    assert not missing and not stale, (
        "docs/INGEST.md's table of differences from Spark is out of date.\n"
        "Cases that differ as follows and are not documented so:\n" + "\n".join(missing)
        + "\nDocumented cases that no longer differ: " + ", ".join(stale))


def test_no_row_that_is_not_a_record_and_every_record_accounted_for(
        outcomes: list[Outcomes]) -> None:
    """Every committed row carries the id of a record of the corpus; each case's records
    become exactly as many rows + error records; and per corpus, read back: source
    records = committed rows + committed error records."""
    for out in outcomes:
        assert out.unattributed == [], f"{out.corpus.name}: rows of no source record"
        wrong = {c.name: (c.records, len(out.ours[c.name])) for c in out.corpus.cases
                 if len(out.ours[c.name]) != c.records}
        assert not wrong, f"{out.corpus.name}: (source records, outcomes) {wrong}"
        total = sum(len(v) for v in out.ours.values())
        assert total == out.corpus.records
        # what the ingest reports and the commit metadata hold: the parser's counts
        source = (out.corpus.records, out.corpus.lines)
        assert (out.result.source_records, out.result.source_lines) == source
        meta = Table(out.result.commit.path).commit_metadata(out.result.commit.instant)
        assert (meta["source_records"], meta["source_lines"]) == source


def test_the_corpus_covers_the_specifications(outcomes: list[Outcomes]) -> None:
    """The corpus is what it says: rows and error records in both formats, and most
    cases agree with Spark."""
    for out in outcomes:
        kinds = {o[0] for v in out.ours.values() for o in v}
        assert kinds == {"row", "bad"} or out.corpus.name.endswith("_wide"), out.corpus.name
    agree = sum(1 for o in outcomes for c in o.corpus.cases
                if _same(o.spark[c.name], o.ours[c.name]))
    assert agree > len(differences(outcomes))
