"""The vectorized path check agrees with markerstore.paths.path_problem, path by path."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from markerstore.paths import path_problem
from markerstore.paths_arrow import bad_paths, check_paths

SEED = 20261122
PIECES = ["a", "b=1", "", ".", "..", "...", ".a", "a.", ".markerstore", ".markerstorex",
          "x\\y", "é", "日付", "\x01", "\x7f", "\t", " ", "s3:", "s3://b", "A1+.-://x",
          "1a://", "file:", "part-0.parquet", "%2e%2e"]


def _corpus(n: int) -> list[str]:
    rng = random.Random(SEED)
    paths = ["", "/", "//", "a", "/a", "a/", "a//b", "./a", "a/.", "a/..", "../a",
             ".markerstore", ".markerstore/x", "x/.markerstore", "s3://b/k", "a\\b",
             "a\x00b", "...", "a/.../b"]
    for _ in range(n):
        paths.append("/".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 5))))
    return paths


def test_vectorized_check_applies_exactly_the_same_rules() -> None:
    paths = _corpus(5000)
    expected = [path_problem(p) is not None for p in paths]
    assert any(expected) and not all(expected)
    assert bad_paths(pa.array(paths)).to_pylist() == expected
    chunked = pa.chunked_array([paths[:100], paths[100:]])
    assert bad_paths(chunked).to_pylist() == expected
    assert bad_paths(pa.array(["a", None])).to_pylist() == [False, True]


def test_check_paths_names_the_first_bad_one_with_its_reason() -> None:
    check_paths(pa.array(["a/b.parquet", "c.parquet"]))
    with pytest.raises(ValueError, match=r"'a/\.\./b' is not inside the table: it has an "
                                         r"empty, '\.' or '\.\.' segment"):
        check_paths(pa.array(["ok.parquet", "a/../b", "/abs"]), what="file path")


def test_reconcile_takes_committed_files_as_arrow(tmp_path: object) -> None:
    from pathlib import Path

    from markerstore import Table

    root = Path(str(tmp_path)) / "t"
    table = Table(str(root))
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    names = [f"f{i}_w_{instant}.parquet" for i in range(6)]
    for name in names:
        markers.create("d=1", name)
        (root / "d=1").mkdir(parents=True, exist_ok=True)
        (root / "d=1" / name).write_bytes(b"PAR1")
    bad = [f"d=1/{names[0]}", "d=1/../../etc/passwd"]
    with pytest.raises(ValueError, match="is not inside the table"):
        table.reconcile(instant, pa.array(bad))
    with pytest.raises(ValueError, match="'path' column"):
        table.reconcile(instant, pa.table({"file": [names[0]]}))
    assert all((root / "d=1" / n).exists() for n in names)  # nothing deleted
    committed = pa.table({"path": [f"d=1/{n}" for n in names[:3]]
                          + [str(root / "d=1" / names[3])]})  # one absolute
    result = table.reconcile(instant, committed)
    assert sorted(result.invalid_files) == [f"d=1/{n}" for n in names[4:]]
    assert [n for n in names if (root / "d=1" / n).exists()] == names[:4]
    again = table.reconcile(instant, [f"d=1/{n}" for n in names[:4]])  # a list: the same
    assert sorted(again.invalid_files) == sorted(result.invalid_files)
