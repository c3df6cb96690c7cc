"""Bytes that are not UTF-8 and records too large, through the ingest's task path: never a
row with U+FFFD unless asked (encoding.errors=replace); an error record of reason
`encoding` whose bytes come back exactly from context['recordBase64']; a record over
record.max_bytes is one error record of reason `size` (its start, its true size), read
through without being held, and the records after it read on."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

from tests.support.ingest_run import reasons, run

IDV = "id BIGINT, v STRING"


def test_bytes_that_are_not_utf8_are_an_encoding_error_with_the_bytes(tmp_path: Path
                                                                      ) -> None:
    """Today: `{"id": 42, "v": "\\xff"}` became a row with v = U+FFFD."""
    bad = b'{"id": 42, "v": "\xff\xfe caf\xc3"}'
    rows, errors = run(tmp_path / "in.json", b'{"id": 1, "v": "ok"}\n' + bad + b"\r\n", IDV)
    assert rows == [{"id": 1, "v": "ok"}]
    (error,) = errors
    assert reasons(errors) == [("encoding", "2")]
    assert base64.b64decode(error["context"]["recordBase64"]) == bad
    assert json.loads(error["record"]) == bad.decode("utf-8", "replace")
    assert error["context"]["sourceOffset"] == "21"
    assert error["message"].startswith("UnicodeDecodeError: 'utf-8' codec can't decode")


def test_encoding_errors_replace_reads_them_with_replacement_characters(tmp_path: Path
                                                                        ) -> None:
    data = b'{"id": 1, "v": "\xff"}\n'
    rows, errors = run(tmp_path / "in.json", data, IDV,
                       options={"markerstore.ingest.encoding.errors": "replace"})
    assert rows == [{"id": 1, "v": "\ufffd"}] and errors == []


def test_a_csv_record_over_lines_with_a_bad_byte_is_one_encoding_error(tmp_path: Path
                                                                      ) -> None:
    record = b'1,"two\r\nl\xffines"'
    rows, errors = run(tmp_path / "in.csv", b"id,v\r\n" + record + b"\r\n2,x\r\n", IDV)
    assert rows == [{"id": 2, "v": "x"}]
    assert reasons(errors) == [("encoding", "2")]
    assert base64.b64decode(errors[0]["context"]["recordBase64"]) == record


def test_a_line_over_the_limit_is_one_size_error_and_reading_goes_on(tmp_path: Path
                                                                    ) -> None:
    big = b'{"id": 2, "v": "' + b"x" * 300_000 + b'"}'
    data = b'{"id": 1}\n' + big + b'\r\n{"id": 3}\n'
    for block_bytes in (1000, 1 << 20):
        rows, errors = run(tmp_path / "in.json", data, IDV, block_bytes=block_bytes,
                           options={"markerstore.ingest.record.max_bytes": 10_000})
        assert sorted(r["id"] for r in rows) == [1, 3]
        assert reasons(errors) == [("size", "2")]
        context = errors[0]["context"]
        assert (context["recordBytes"], context["sourceOffset"]) == (str(len(big)), "10")
        assert json.loads(errors[0]["record"]) == big[:10_000].decode()  # its start
        assert "larger than the limit of 10000 bytes" in errors[0]["message"]


def test_a_csv_record_over_the_limit_and_a_quote_never_closed(tmp_path: Path) -> None:
    big = b'2,"' + b"line\n" * 5000 + b'"'
    data = b"id,v\n1,a\n" + big + b"\n3,c\n4,\"open\n" + b"z\n" * 3000
    for block_bytes in (997, 1 << 20):
        rows, errors = run(tmp_path / "in.csv", data, IDV, block_bytes=block_bytes,
                           options={"markerstore.ingest.record.max_bytes": 4096})
        assert sorted(r["id"] for r in rows) == [1, 3]
        assert reasons(errors) == [("size", "3"), ("size", "5005")]
        assert [e["context"]["recordBytes"] for e in errors] == [
            str(len(big)), str(len(data) - data.index(b'4,"open') - 1)]


def test_a_huge_line_in_a_byte_range_is_read_once_and_never_held(tmp_path: Path) -> None:
    """A 48 MiB line without a newline, limit 1 MiB, in 4 MiB ranges read in 1 MiB
    blocks: the range it starts in gives one size error, the others skip it, and no
    process holds it: the peak RSS grows by a few blocks, not by the line."""
    path = tmp_path / "in.json"
    with open(path, "wb") as handle:
        handle.write(b'{"id": 1}\n{"v": "')
        for _ in range(48):
            handle.write(b"y" * (1 << 20))
        handle.write(b'"}\n{"id": 3}\n')
    code = f"""
import errortable
from markerstore.commit import TaskSpec
from markerstore.ingest.schema import ddl_to_arrow
from markerstore.ingest.sources import list_tasks
from markerstore.ingest.task import IngestTask
def status(key):
    return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) // 1024
task = IngestTask(TaskSpec("file:///unused", "i", "u", "direct"),
                  errortable.Validator(ddl_to_arrow("id BIGINT"), extra_columns="ignore"),
                  errortable.CaptureContext, block_bytes=1 << 20,
                  options={{"markerstore.ingest.record.max_bytes": 1 << 20}})
rows, found = [], []
tasks = list_tasks({str(path)!r}, split_bytes=4 << 20)
list(task.results(tasks[0], None, errortable.CaptureContext()))  # warm: DuckDB, Arrow
open("/proc/self/clear_refs", "w").write("5")  # the peak RSS starts again from here
before = status("VmRSS")
for t in tasks:
    for good, errors in task.results(t, None, errortable.CaptureContext()):
        rows += good.column("id").to_pylist()
        found += [] if errors is None else errors.column("context").to_pylist()
grown = status("VmHWM") - before
print(len(tasks), sorted(rows), [dict(c)["reason"] for c in found],
      [dict(c)["recordBytes"] for c in found], grown)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split(" ", 1)
    tasks, rest = int(out[0]), out[1]
    assert tasks > 10
    assert rest.startswith(f"[1, 3] ['size'] ['{48 * (1 << 20) + 9}']"), rest
    assert int(rest.rsplit(" ", 1)[1]) < 16, rest  # MiB: a few blocks, not 48 MiB
