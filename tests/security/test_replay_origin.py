"""Replay writes only into the table an error instant came from.

The attack: whoever can write an error table's folder edits `source_table` in an error
commit's JSON to name another table (and, knowing that table's id, `source_table_id` too).
`errortable replay` read the target from that JSON and committed the error rows into the
unrelated table. Now it refuses with one line before writing anything: the target's table
id must be the one the error instant records, and the target's own commit of the main
instant must name this error instant.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import errortable
from markerstore import Table
from markerstore.errors import ErrorTableError
from tests.support.errortable_writes import batch, full_write
from tests.support.locations import Location


def _edit_error_commit(errors: Table, **changes: str | None) -> None:
    instant, _ = next((i, m) for i, m in errors.completed() if m.get("operation") == "errors")
    path = errors.storage.path(".markerstore", "timeline", f"{instant}.commit")
    meta = json.loads(errors.storage.get(path))
    meta.update(changes)
    errors.storage.put(path, json.dumps(meta).encode())


def _rows(table: Table) -> int:
    return sum(int(f.get("rows") or 0) for _, m in table.completed() for f in m["files"])


def test_replay_refuses_a_target_edited_into_the_error_commit(local_where: Location) -> None:
    source = Table(f"{local_where.url}/source")
    victim = Table(f"{local_where.url}/victim")
    full_write(source, [batch(2, {"check": 2})])  # two rows replay would now write
    full_write(victim, [batch(3)])  # an unrelated table of the same schema
    errors = Table(f"{local_where.url}/source_errors")
    before = _rows(victim), len(victim.completed())

    _edit_error_commit(errors, source_table=victim.storage.url())
    with pytest.raises(ErrorTableError, match="records table id .* has"):
        errortable.replay(errors.storage.url(), "reason = 'check'")
    out = subprocess.run([sys.executable, "-m", "markerstore.cli.errortable", "replay",
                          errors.storage.url(), "--where", "reason = 'check'"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert "refusing to replay" in out.stderr and victim.storage.url() in out.stderr

    # The victim's id can be read from its folder: forged too, the link is still missing.
    _edit_error_commit(errors, source_table_id=victim.table_id())
    with pytest.raises(ErrorTableError, match="not on the timeline|not completed|did not write"):
        errortable.replay(errors.storage.url(), "reason = 'check'")
    assert (_rows(victim), len(victim.completed())) == before  # nothing was committed

    # Put back, the same rows replay into their own table.
    _edit_error_commit(errors, source_table=source.storage.url(),
                       source_table_id=source.table_id())
    assert errortable.replay(errors.storage.url(), "reason = 'check'").written_rows == 2
    assert (_rows(victim), len(victim.completed())) == before
