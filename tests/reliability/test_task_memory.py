"""A task's memory is bounded by its block size, whatever the input's shape
(docs/RELIABILITY.md, "Memory per task"): one ingest task is run on each hostile file in a
subprocess (no Spark: the task's own code), and the growth of its peak RSS is measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
