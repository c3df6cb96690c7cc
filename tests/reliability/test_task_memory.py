"""A task's memory is bounded by its block size, whatever the input's shape
(docs/RELIABILITY.md, "Memory per task"): one ingest task is run on each hostile file in a
subprocess (no Spark: the task's own code), and the growth of its peak RSS is measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from errortable import jsontext
from markerstore.ingest import jsondoc

MIB = 1 << 20

_TASK = """
import sys
import errortable
from markerstore.commit import TaskSpec
from markerstore.ingest.schema import ddl_to_arrow
from markerstore.ingest.sources import list_tasks
from markerstore.ingest.task import IngestTask

def status(key):
    return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) // 1024

path, multiline, warm = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
options = {"multiLine": "true"} if multiline else {}
task = IngestTask(TaskSpec("file:///unused", "i", "u", "direct"),
                  errortable.Validator(ddl_to_arrow("a BIGINT, b STRING")),
                  errortable.CaptureContext, options=options)
def run(name):
    found = 0
    for t in list_tasks(name, json_documents=multiline):
        header = "a,b" if t.format == "csv" else None
        for good, errors in task.results(t, header, errortable.CaptureContext()):
            found += 0 if errors is None else errors.num_rows
    return found
run(warm)  # DuckDB, Arrow and the parsers loaded before the peak is reset
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS")
found = run(path)
print(found, status("VmHWM") - before)
"""


def _peak(tmp_path: Path, name: str, data: bytes, multiline: bool = False
          ) -> tuple[int, int]:
    """(error records, MiB the peak RSS grew by) of one task reading `data`."""
    path = tmp_path / name
    path.write_bytes(data)
    warm = tmp_path / ("warm" + path.suffix)
    warm.write_bytes(b"a,b\n1,x\n2\n" if path.suffix == ".csv" else b'{"a": 1}\nx\n[1]')
    out = subprocess.run([sys.executable, "-c", _TASK, str(path), "1" if multiline else "0",
                          str(warm)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    found, grown = out.stdout.split()
    return int(found), int(grown)


def _bound(data: bytes) -> int:
    """What the test allows (MiB): a few times the input, and what the records of one
    block in flight take (a block holds at most BLOCK_RECORDS of them)."""
    return 4 * len(data) // MIB + 128


@pytest.mark.parametrize(("name", "data", "multiline", "records"), [
    # 256k one-byte bad JSON lines: each an error record (today +566 MB for 512 KiB)
    ("lines.json", b"x\n" * 262_144, False, 262_144),
    # 128k CSV records of the wrong width
    ("wide.csv", b"a,b\n" + b"1,2,3\n" * 131_072, False, 131_072),
    # a multiLine document of 175k empty arrays: each element an error record
    ("elements.json", b"[" + b"[]," * 174_761 + b"[]]", True, 174_762),
    # a 16 MiB multiLine document of nesting (today +633 MB), and one never closed
    ("deep.json", b"[" * (8 * MIB) + b"]" * (8 * MIB), True, 1),
    ("open.json", b"[" * (16 * MIB), True, 1),
    # value-dense JSON lines, good rows (DuckDB's parser held 70 times their text)
    ("dense.json", b'{"a": 1, "b": [' + b"0," * (4 * MIB) + b"0]}\n", False, 0),
    ("many_dense.json", (b'{"a": 1, "b": [' + b"0," * 50_000 + b"0]}\n") * 160, False, 0),
])
def test_a_task_holds_a_few_blocks_whatever_the_shape(tmp_path: Path, name: str,
                                                      data: bytes, multiline: bool,
                                                      records: int) -> None:
    found, grown = _peak(tmp_path, name, data, multiline)
    assert found == records  # every bad record an error record: nothing lost
    assert grown < _bound(data), f"{name}: the peak grew by {grown} MiB"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{},"\\: ab\n'),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(alphabet='[]{},"\\ab', max_size=3), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(elements=st.lists(_JSON, max_size=6), chunk=st.integers(1, 9),
       indent=st.sampled_from([None, 1]))
def test_scans_a_chunk_at_a_time_find_what_one_pass_finds(
        elements: list[object], chunk: int, indent: int | None) -> None:
    """The chunked scans (element boundaries of a document, nesting depth of a record)
    carry their state across chunk boundaries: with chunks of a few bytes, every element
    is found whole and the depth is the document's."""
    text = json.dumps(elements, indent=indent)
    data = text.encode()
    with patch.object(jsondoc, "_CHUNK", chunk), patch.object(jsontext, "_CHUNK", chunk):
        starts, stops = jsondoc.record_spans(data)
        depth = jsontext.nesting_depth(text)
    assert [json.loads(data[a:b]) for a, b in zip(starts, stops, strict=True)] == elements
    assert depth == _depth(elements)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0
