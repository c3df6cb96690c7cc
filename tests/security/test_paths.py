"""The one table-relative path check, shared by requests and by what is read from storage."""

from __future__ import annotations

import pytest

from markerstore import CorruptTableError, InvalidMarkerError, MarkerName
from markerstore.paths import checked_paths, path_problem


@pytest.mark.parametrize(("path", "fragment"), [
    ("../x", "'..'"), ("a/../../b", "'..'"), ("a/./b", "'.'"), ("a//b", "empty"),
    ("a/", "empty"), ("/etc/passwd", "absolute"), ("s3://other/x", "absolute"),
    ("file:///etc/x", "absolute"), ("a\\b", "backslash"), ("a\x00b", "control"),
    ("a\nb", "control"), ("a\x7fb", "control"), ("a\ud800b", "UTF-8"), ("", "empty"),
    (".markerstore/timeline/1.commit", ".markerstore"), (7, "not a string"),
    (None, "not a string"),
])
def test_bad_paths(path: object, fragment: str) -> None:
    problem = path_problem(path)
    assert problem is not None and fragment in problem


@pytest.mark.parametrize("path", ["x.parquet", "day=2024-01-01/x.parquet",
                                  "a=1/b=%2F/c d/ü.parquet", "p/.hidden", "p/.markerstore"])
def test_good_paths(path: str) -> None:
    assert path_problem(path) is None


def test_checked_paths_names_the_file_and_the_entry() -> None:
    with pytest.raises(CorruptTableError) as info:
        checked_paths(["ok.parquet", "../../victim/x.txt"], "s3://b/t/plan.json",
                      what="replaced file")
    assert info.value.file == "s3://b/t/plan.json"
    assert "replaced file '../../victim/x.txt'" in info.value.entry
    assert str(info.value).count("\n") == 0


def test_requests_use_the_same_rules() -> None:
    for partition in ("day=1\ud800", ".markerstore/timeline"):
        with pytest.raises(InvalidMarkerError):
            MarkerName.build(partition, "f.parquet", "CREATE")
    with pytest.raises(InvalidMarkerError, match="UTF-8"):
        MarkerName.build("p", "f\udc80.parquet", "CREATE")
