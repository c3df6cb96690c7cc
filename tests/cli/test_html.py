"""The one HTML renderer behind every result's _repr_html_ (markerstore.render.html)."""

from __future__ import annotations

import pyarrow as pa

import errortable.ops.replays
import errortable.ops.retention
import errortable.reading.report
from markerstore.commit.result import CommitResult
from markerstore.ingest.pipeline import IngestResult
from markerstore.render import html as notebook


def test_rows_and_fields_are_escaped_and_cut() -> None:
    rows = [{"a": "<b>x</b>", "b": {"k": 1}, "c": None, "d": "y" * 300}]
    html = notebook.table_html(rows)
    assert "<th>a</th>" in html and "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x" not in html
    assert '{&quot;k&quot;: 1}' in html and "<td></td>" in html and "y" * 200 + "…" in html
    assert notebook.table_html([]) == "<p><i>(no rows)</i></p>"
    fields = notebook.fields_html({"path": "<script>", "n": 3}, caption="a & b")
    assert fields.startswith("<table><caption>a &amp; b</caption>")
    assert "&lt;script&gt;" in fields and "<script>" not in fields and "3</td>" in fields


def test_errortable_and_ingest_render_through_it() -> None:
    for module in (errortable.reading.report, errortable.ops.replays, errortable.ops.retention):
        assert module.table_html is notebook.table_html
    commit = CommitResult(path="/t/<x>", instant="1", write_uuid="w", files=[],
                          rows_written=0)
    result = IngestResult(commit=commit, source="<img src=x onerror=alert(1)>",
                          source_tasks=1, schema=pa.schema([("a", pa.int64())]))
    html = result._repr_html_()
    assert html == notebook.fields_html(result.summary())
    assert "<img" not in html and "&lt;img src=x" in html
