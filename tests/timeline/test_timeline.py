"""Instants, states, heartbeats and recovery of failed writers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from markerstore import Table
from markerstore.errors import InstantNotFoundError
from markerstore.sql import sql as sql_views
from markerstore.timeline import format_instant, is_instant, parse_instant
from tests.support.files import exists, marked_write
from tests.support.locations import Location


def test_instant_format_round_trip() -> None:
    instant = "20261121123456789"
    assert is_instant(instant)
    assert format_instant(parse_instant(instant)) == instant
    assert not is_instant("2026112112345678")
    with pytest.raises(ValueError, match="not an instant id"):
        parse_instant("not-an-instant")


def test_instants_are_unique_and_sorted_under_concurrency(location: Location) -> None:
    tables = [Table(location.url, location.storage_options) for _ in range(4)]
    created: list[str] = []
    lock = threading.Lock()

    def start(table: Table) -> None:
        for _ in range(5):
            instant = table.start_commit(heartbeat=False, rollback_failed=False)
            with lock:
                created.append(instant)

    threads = [threading.Thread(target=start, args=(t,)) for t in tables]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(created) == len(set(created)) == 20
    listed = [i.instant for i in tables[0].timeline()]
    assert listed == sorted(created)
    assert {i.state for i in tables[0].timeline()} == {"inflight"}


def test_states_progress(location: Location) -> None:
    table = Table(location.url, location.storage_options)
    first = table.start_commit(heartbeat=False)
    assert table.state(first) == "inflight"
    table.commit(first, [])
    second = table.start_commit(heartbeat=False)
    table.rollback(second, force=True)
    states = [(i.instant, i.state) for i in table.timeline()]
    assert states == [(first, "completed"), (second, "rolledback")]
    with pytest.raises(InstantNotFoundError, match="no instant"):
        table.state("20000101000000000")


def test_heartbeat_expiry_makes_an_instant_failed_for_lazy_recovery() -> None:
    options = {"markerstore.heartbeat.interval_ms": 50,
               "hoodie.client.heartbeat.tolerable.misses": 1}
    writer = Table("memory://heartbeat/t", options=options)
    instant = writer.start_commit()
    observer = Table("memory://heartbeat/t", options=options)
    time.sleep(0.3)
    assert observer.failed_instants("lazy") == []  # the thread keeps beating
    writer._beating[instant].stop(delete=False)  # the writer stops beating (it died)
    time.sleep(0.2)
    assert observer.heartbeats.is_expired(instant)
    assert observer.failed_instants("lazy") == [instant]


def test_next_write_rolls_back_a_killed_writer(tmp_path: Path) -> None:
    """A writer process dies after writing files; the next writer (eager policy) rolls its
    instant back from markers even though its heartbeat has not expired yet."""
    url = str(tmp_path / "table")
    script = textwrap.dedent(f"""
        import os
        from markerstore import Table
        t = Table({url!r})
        i = t.start_commit()
        m = t.markers(i)
        for name in ("a.parquet", "b.parquet"):
            m.create("p=1", name)
            t.storage.put(t.storage.path("p=1", name), b"partial")
        print(i, flush=True)
        os._exit(1)  # no cleanup: like kill -9
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    dead = out.stdout.strip()
    assert is_instant(dead), out.stderr
    table = Table(url)
    assert table.state(dead) == "inflight"
    assert not table.heartbeats.is_expired(dead)  # 60 s interval: still fresh
    assert table.failed_instants("lazy") == []
    assert table.failed_instants("eager") == [dead]  # its process is gone
    new = table.start_commit(heartbeat=False)
    assert table.state(dead) == "rolledback"
    assert not exists(table, "p=1/a.parquet") and not exists(table, "p=1/b.parquet")
    marked_write(table, new, ["p=1/c.parquet"])
    table.commit(new, ["p=1/c.parquet"])
    assert sql_views(table, "SELECT path FROM files").fetchall() == [("p=1/c.parquet",)]


def test_leftover_markers_of_completed_instant_are_cleaned(location: Location) -> None:
    table = Table(location.url, location.storage_options)
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["a.parquet"])
    # A writer that died after completing, before deleting its markers:
    table._timeline.complete(instant, {"files": [{"path": "a.parquet"}]})
    assert table.markers  # markers folder still there
    assert table.clean_markers() == [instant]
    assert exists(table, "a.parquet")
    assert sql_views(table, "SELECT count(*) FROM markers").fetchall() == [(0,)]


def _commit_one(table: Table, name: str) -> str:
    instant = table.start_commit(heartbeat=False, rollback_failed=False)
    marked_write(table, instant, [f"p=1/{name}"])
    table.commit(instant, [f"p=1/{name}"])
    return instant


def test_a_pinned_timeline_is_listed_once_and_reads_the_same_instants(
        location: Location) -> None:
    reader = Table(location.url, location.storage_options)
    writer = Table(location.url, location.storage_options)
    first = _commit_one(writer, "a.parquet")
    reader.storage.reset_requests()
    with reader.pinned_timeline():
        before = reader.timeline()
        second = _commit_one(writer, "b.parquet")  # another writer, during the block
        assert reader.timeline() == before and [i.instant for i in before] == [first]
        assert [i for i, _ in reader.completed()] == [first]
        assert reader.state(first) == "completed"
        listed = reader.storage.requests()["LIST"]
    assert listed == 1  # one listing for every read of the block
    assert [i.instant for i in reader.timeline()] == [first, second]  # after it: fresh


def test_a_commit_through_the_pinned_table_lists_afresh(location: Location) -> None:
    table = Table(location.url, location.storage_options)
    with table.pinned_timeline():
        assert table.timeline() == []
        instant = _commit_one(table, "a.parquet")
        assert [(i.instant, i.state) for i in table.timeline()] == [(instant, "completed")]
        started = table.start_commit(heartbeat=False, rollback_failed=False)
        assert table.timeline()[-1].instant == started
        table.rollback(started, force=True)  # its writer (this process) is alive
        assert [(i.instant, i.state) for i in table.timeline()] == [
            (instant, "completed"), (started, "rolledback")]


def test_completing_within_a_pin_keeps_the_listing_with_the_instant_completed(
        location: Location) -> None:
    table = Table(location.url, location.storage_options)
    other = Table(location.url, location.storage_options)
    first = _commit_one(table, "a.parquet")
    instant = table.start_commit(heartbeat=False, rollback_failed=False)
    with table.pinned_timeline():
        assert table.state(instant) == "inflight"  # the one listing of the block
        late = other.start_commit(heartbeat=False, rollback_failed=False)  # not listed
        timeline = table._timeline
        listings = []
        listed = timeline._list_instants
        timeline._list_instants = lambda: listings.append(1) or listed()  # type: ignore
        table.commit(instant, [])
        assert [(i.instant, i.state) for i in table.timeline()] == [
            (first, "completed"), (instant, "completed")]
        assert listings == []
    assert [i.instant for i in table.timeline()] == [first, instant, late]  # fresh again


def test_a_pin_is_the_pinning_thread_s_alone(location: Location) -> None:
    table = Table(location.url, location.storage_options)
    writer = Table(location.url, location.storage_options)
    first = _commit_one(writer, "a.parquet")
    seen: list[list[str]] = []
    with table.pinned_timeline():
        assert [i.instant for i in table.timeline()] == [first]
        second = _commit_one(writer, "b.parquet")
        reader = threading.Thread(
            target=lambda: seen.append([i.instant for i in table.timeline()]))
        reader.start()
        reader.join()
        assert [i.instant for i in table.timeline()] == [first]  # still pinned here
    assert seen == [[first, second]]  # another thread of the same Table lists afresh


def test_a_long_lived_timeline_lists_what_a_new_one_lists(location: Location) -> None:
    """The listing is parsed incrementally (only the names that changed): after every
    transition, the instants and states a long-lived Table reads are those a new one
    reads from nothing."""
    table = Table(location.url, location.storage_options)
    for n in range(12):
        instant = table.start_commit(heartbeat=False, rollback_failed=False)
        if n % 3 == 0:
            table.commit(instant, [])
        elif n % 3 == 1:
            table.rollback(instant, force=True)  # n % 3 == 2: left inflight
        fresh = Table(location.url, location.storage_options).timeline()
        assert [(i.instant, i.state, i.files) for i in table.timeline()] == [
            (i.instant, i.state, i.files) for i in fresh]
    assert sorted({i.state for i in table.timeline()}) == [
        "completed", "inflight", "rolledback"]
