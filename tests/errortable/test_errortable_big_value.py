"""A huge bad value costs a few times its size, not ten: the Validator's error record for
it (a failed cast, a failed check) and the error file that holds it. Measured in a fresh
process: the peak RSS over the baseline, after one warm-up record."""

from __future__ import annotations

import subprocess
import sys

import pytest

CODE = """
import errortable
from errortable.writing.files import ErrorFileWriter
from markerstore.ingest.schema import ddl_to_arrow

def status(key):
    return int(open("/proc/self/status").read().split(key + ":")[1].split()[0]) // 1024

ddl, checks = {ddl!r}, {checks!r}
validator = errortable.Validator(ddl_to_arrow(ddl), checks=checks)
validator.split_records_arrow([{{"id": 1, "s": "1"}}])  # warm: DuckDB, Arrow
value = "x" * (20 * 1024 * 1024)
open("/proc/self/clear_refs", "w").write("5")  # the peak RSS starts again from here
before = status("VmRSS")
good, errors = validator.split_records_arrow([{{"id": 1, "s": value}}])
with open({path!r}, "wb") as handle:
    writer = ErrorFileWriter(handle, "parquet")
    writer.write_arrow(errors)
    writer.close()
print(errors.num_rows, good.num_rows, status("VmHWM") - before)
"""


@pytest.mark.parametrize(("ddl", "checks"), [
    ("id BIGINT, s BIGINT", {}),  # a cast fails: Arrow's message quotes the value
    ("id BIGINT, s STRING", {"short": "length(s) < 10"}),  # a check fails
])
def test_a_20_mb_bad_value_costs_a_few_times_its_size(tmp_path: object, ddl: str,
                                                      checks: dict[str, str]) -> None:
    code = CODE.format(ddl=ddl, checks=checks, path=f"{tmp_path}/errors.parquet")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    assert out[:2] == ["1", "0"]
    assert int(out[2]) < 6 * 20, out  # MiB; it was about 10 times the value's size
