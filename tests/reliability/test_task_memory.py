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

from markerstore.ingest import jsondoc
from markerstore.ingest.blocks import BLOCK_BYTES
from markerstore.values import json as jsontext

MIB = 1 << 20

_TASK = """
import sys
import errortable
from markerstore.commit import TaskSpec
from markerstore.ingest.schema import ddl_to_arrow
from markerstore.ingest.quotestates import quote_states
from markerstore.ingest.sources import list_tasks
from markerstore.ingest.options import read_options
from markerstore.ingest.task import IngestTask

def status(key):
    return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) // 1024

path, multiline, warm = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
split = {"split_bytes": int(sys.argv[4])} if len(sys.argv) > 4 else {}
options = {"multiLine": "true"} if multiline else {}
task = IngestTask(TaskSpec("file:///unused", "i", "u", "direct"),
                  errortable.Validator(ddl_to_arrow("a BIGINT, b STRING")),
                  errortable.CaptureContext, options=options)
def run(name):
    found = 0
    # the byte ranges the driver cuts, each told its quote state (the driver's first pass)
    for t in quote_states(list_tasks(name, json_documents=multiline, **split), None,
                          read_options(options)):
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


def _peak(tmp_path: Path, name: str, data: bytes, multiline: bool = False,
          split: int | None = None, timeout: int = 300) -> tuple[int, int]:
    """(error records, MiB the peak RSS grew by) of one task reading `data` (in byte
    ranges of `split`, each after the other, when given)."""
    path = tmp_path / name
    path.write_bytes(data)
    warm = tmp_path / ("warm" + path.suffix)
    warm.write_bytes(b"a,b\n1,x\n2\n" if path.suffix == ".csv" else b'{"a": 1}\nx\n[1]')
    out = subprocess.run([sys.executable, "-c", _TASK, str(path), "1" if multiline else "0",
                          str(warm), *([str(split)] if split else [])],
                         capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
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


def _flips(records: int) -> bytes:
    """CSV whose quoted values end with a line break: every line flips the quote state."""
    return b"a,b\n" + "".join(f'{i},"text {i}\n"\n' for i in range(records)).encode()


# A task's bound whatever the file's size (docs/RELIABILITY.md): 8 x block_bytes + 128 MiB
_CONSTANT = 8 * (BLOCK_BYTES // MIB) + 128


def test_quote_flip_lines_in_ranges_hold_a_bound_whatever_the_look_back(
        tmp_path: Path) -> None:
    """36 MB of lines that each flip the quote state, in ranges of 4 MiB: no window decides
    a range's state, and the driver's pass gives it (before: each range held the whole
    window back to the file's start, +464 MiB in 168 s)."""
    found, grown = _peak(tmp_path, "flips.csv", _flips(1_600_000), split=4 * MIB)
    assert found == 0
    assert grown < _CONSTANT, f"the peak grew by {grown} MiB"


def test_a_quoted_field_of_24_mib_of_empty_lines_holds_the_bound(tmp_path: Path) -> None:
    """One record whose quoted field holds 24M line breaks (a position of 8 bytes for each
    byte read): its lines are counted as it is read on, not held as positions, and the
    bytes before it are not scanned again with it (before: +1.9 GiB at the read alone)."""
    found, grown = _peak(tmp_path, "newlines.csv",
                         b'a,b\n1,"' + b"\n" * (24 * MIB) + b'"\n2,x\n')
    assert found == 0
    assert grown < _CONSTANT, f"the peak grew by {grown} MiB"


@pytest.mark.campaign
@pytest.mark.parametrize("shape", ["flips", "field"])
def test_100_mib_and_more_of_each_shape_in_ranges_hold_the_same_bound(
        tmp_path: Path, shape: str) -> None:
    """112 MiB of quote-flip lines in 4 ranges (before: +969 MiB in a worker, 29 s), and a
    73 MiB quoted field in a 100 MiB file (default limit 64 MiB: one size error record,
    read through a block at a time): the same constant bound as 36 MB."""
    if shape == "flips":
        data, errors = _flips(4_750_000), 0
    else:
        rows = "".join(f"{i},x\n" for i in range(3_000_000)).encode()
        data = (b"a,b\n" + rows[:len(rows) // 2] + b'1,"' + b"field line\n" * 6_960_000
                + b'"\n' + rows[len(rows) // 2:])
        errors = 1
    assert len(data) > 100 * MIB
    found, grown = _peak(tmp_path, f"{shape}.csv", data, split=-(-len(data) // 4),
                         timeout=900)
    assert found == errors
    assert grown < _CONSTANT, f"{shape}: the peak grew by {grown} MiB"


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
