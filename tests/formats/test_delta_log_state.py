"""What a publish reads of a Delta log (markerstore/formats/delta_state.py), checked
against delta-rs reading the same log: tables delta-rs wrote itself, with checkpoints,
app transactions, overwrites and a new column; the state a thread keeps is read afresh
when the log is rebuilt under it; a checkpoint it cannot read is refused in one line."""

from __future__ import annotations

import json
import shutil
import urllib.parse
from pathlib import Path

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")

from deltalake import DeltaTable, write_deltalake  # noqa: E402
from deltalake.transaction import CommitProperties, Transaction  # noqa: E402

from markerstore import Table  # noqa: E402
from markerstore.errors import TableFormatError  # noqa: E402
from markerstore.formats import delta_state  # noqa: E402


def _batch(start: int, rows: int, extra: bool = False) -> pa.Table:
    data = {"id": pa.array(range(start, start + rows), pa.int64()),
            "part": pa.array([f"p/{n % 3}" for n in range(rows)]),
            "note": pa.array([f"note {n}%" for n in range(rows)])}
    if extra:
        data["score"] = pa.array([n / 2 for n in range(rows)])
    return pa.table(data)


def _write(folder: Path, n: int, **kwargs: object) -> None:
    kwargs.setdefault("mode", "append")
    write_deltalake(str(folder), _batch(n * 10, 10, extra=kwargs.pop("extra", False)),
                    partition_by=["part"], commit_properties=CommitProperties(
                        app_transactions=[Transaction(f"app-{n}", n, 1)],
                        custom_metadata={"step": str(n)}), **kwargs)  # type: ignore[arg-type]


def _checked(folder: Path) -> delta_state.LogState:
    """The replayed state, asserted equal to what delta-rs reads of the same log."""
    storage = Table(str(folder)).storage
    state = delta_state.read(storage)
    assert state is not None
    delta = DeltaTable(str(folder))
    assert state.version == delta.version()
    assert state.schema() == json.loads(delta.schema().to_json())
    metadata = delta.metadata()
    assert state.metadata is not None
    assert (state.metadata.id, state.metadata.partition_columns,
            state.metadata.configuration) == (metadata.id, metadata.partition_columns,
                                              metadata.configuration)
    protocol = delta.protocol()
    assert state.protocol is not None
    assert (state.protocol.min_reader_version, state.protocol.min_writer_version) == (
        protocol.min_reader_version, protocol.min_writer_version)
    for app_id, version in state.txns.items():
        assert delta.transaction_version(app_id) == version
    latest = delta.history(limit=1)[0]
    assert state.info.get("step") == latest.get("step")
    live = pa.table(delta.get_add_actions(flatten=True)).column("path").to_pylist()
    files = delta_state.live_files(storage)
    assert files is not None
    assert {urllib.parse.unquote(p) for p in files} == {urllib.parse.unquote(p) for p in live}
    return state


def test_the_replayed_log_is_what_delta_rs_reads(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    _write(folder, 0, configuration={"delta.checkpointInterval": "3"})
    for n in range(1, 8):  # checkpoints at 3 and 6, then JSON files after them
        _write(folder, n, mode="overwrite" if n == 4 else "append",
               extra=n >= 5, schema_mode="merge" if n == 5 else None)
    state = _checked(folder)
    assert state.txns == {f"app-{n}": n for n in range(8)}
    assert any(".checkpoint." in x.name for x in (folder / "_delta_log").iterdir())
    # the state kept by this thread: the next read applies only the later versions
    _write(folder, 8, extra=True)
    assert _checked(folder).version == 8


def test_a_log_read_afresh_at_a_checkpointed_version_has_its_commit_info(
        tmp_path: Path) -> None:
    """The latest version's commit info holds the settled mark; a checkpoint does not
    hold commit info, so a log whose latest version is checkpointed reads that version's
    JSON file for it."""
    folder = tmp_path / "t"
    _write(folder, 0, configuration={"delta.checkpointInterval": "3"})
    for n in range(1, 3):  # delta-rs checkpoints version 2 (its third)
        _write(folder, n)
    assert (folder / "_delta_log" / f"{2:020d}.checkpoint.parquet").exists()
    delta_state.forget(Table(str(folder)).storage)
    assert _checked(folder).info.get("step") == "2"


def test_a_log_rebuilt_under_the_kept_state_is_read_afresh(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    for n in range(3):
        _write(folder, n)
    kept = _checked(folder)
    shutil.rmtree(folder / "_delta_log")
    assert delta_state.read(Table(str(folder)).storage) is None  # a lost log
    for n in range(10, 13):  # another table at the same versions
        _write(folder, n)
    again = _checked(folder)
    assert again.version == kept.version
    assert again.metadata is not None and kept.metadata is not None
    assert again.metadata.id != kept.metadata.id
    assert set(again.txns) == {"app-10", "app-11", "app-12"}


def test_a_v2_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    _write(folder, 0)
    (folder / "_delta_log" / f"{1:020d}.checkpoint.{'a' * 8}.json").write_text("{}")
    delta_state.forget(Table(str(folder)).storage)
    with pytest.raises(TableFormatError, match="V2 checkpoint") as caught:
        delta_state.read(Table(str(folder)).storage)
    assert "\n" not in str(caught.value)
