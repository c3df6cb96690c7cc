"""What every cluster scenario checks of a table it wrote, from the facts a runner read
back (tests/cluster/runner.py `facts`: pyarrow and DuckDB, storage, the timeline)."""

from __future__ import annotations

import uuid
from typing import Any

from tests.cluster.harness import Cluster, Runner
from tests.cluster.runner import KEY_EVERY


def expected_ids(rows: int, start: int = 0) -> list[int]:
    """The ids that are rows (the others have a null key: error records)."""
    return [i for i in range(start, start + rows) if i % KEY_EVERY != KEY_EVERY - 1]


def new_table(cluster: Cluster, client: Runner, name: str) -> tuple[str, dict[str, Any]]:
    """A fresh bucket on the S3 host; the table's URL and storage options."""
    bucket = client.call("bucket", endpoint=cluster.s3_endpoint,
                         name=f"{name}-{uuid.uuid4().hex[:8]}")
    return f"s3://{bucket}/table", cluster.storage_options()


def assert_clean(facts: dict[str, Any]) -> None:
    """No marker, staged object, open multipart upload or unfinished instant left; every
    data file on storage is one a completed commit names."""
    assert facts["markers"] == [], facts["markers"]
    assert facts["staged"] == [], facts["staged"]
    assert facts["uploads"] == [], facts["uploads"]
    assert not facts["states"].get("inflight") and not facts["states"].get("requested"), \
        facts["states"]
    assert facts["data_files"] == facts["committed_files"], \
        set(facts["data_files"]) ^ set(facts["committed_files"])


def assert_exact(facts: dict[str, Any], ids: list[int], *, error_records: int) -> None:
    """Exactly `ids`, each once, read by pyarrow and by DuckDB; the error table's count."""
    assert_clean(facts)
    assert facts["data_files"], "no data file"
    assert facts["pyarrow_ids"] == ids
    assert facts["duckdb_ids"] == ids
    assert facts["payload_mismatches"] == 0
    assert facts["errors"] == error_records


def assert_rolled_back(facts: dict[str, Any]) -> None:
    """A failed write that left nothing: no completed instant, no file, no leftover."""
    assert_clean(facts)
    assert not facts["states"].get("completed"), facts["states"]
    assert facts["data_files"] == []


def staging_left(cluster: Cluster) -> list[str]:
    """Task staging folders on the workers' disks (their Spark local dirs and temp dirs;
    the hosts' folders are their local disks)."""
    return sorted(str(p.relative_to(cluster.folder)) for role in cluster.workers
                  for p in cluster.host(role).folder.rglob("markerstore-staging/*"))


def executors_launched(cluster: Cluster) -> int:
    """Executor folders on the workers' disks: one per executor the master ever launched
    there (a lost executor is replaced by a new one)."""
    return sum(1 for path in cluster.folder.glob("worker*/work/app-*/*") if path.is_dir())
