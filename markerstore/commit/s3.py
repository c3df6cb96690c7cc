"""S3 multipart uploads, through the table's s3fs instance (so Storage counts requests).

Every call goes through ``Storage.retry``: throttling and timeouts are retried; a missing
upload surfaces as FileNotFoundError (s3fs translates NoSuchUpload), an If-None-Match
precondition failure as FileExistsError.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from markerstore.commit.stats import PendingUpload
from markerstore.errors import StorageError
from markerstore.storage import Storage

log = logging.getLogger(__name__)


def _call(storage: Storage, what: str, op: str, kind: str = "PUT", **kwargs: Any) -> Any:
    return storage.retry(what, kind, lambda: storage.fs.call_s3(op, **kwargs))


def bucket_key(storage: Storage, relative: str) -> tuple[str, str]:
    """Bucket and key of a path relative to the table."""
    bucket, _, key = storage.path(relative).partition("/")
    return bucket, key


def table_prefix(storage: Storage) -> tuple[str, str]:
    """Bucket and key prefix (ending in '/') of the table."""
    bucket, _, key = storage.root.partition("/")
    return bucket, (key.rstrip("/") + "/") if key else ""


def crc32_hex(value: int) -> str:
    return f"crc32:{value & 0xFFFFFFFF:08x}"


def multipart_etag(parts: tuple[tuple[int, str], ...] | list[tuple[int, str]]) -> str:
    """The ETag S3 gives the object a multipart upload completes into."""
    digest = hashlib.md5(usedforsecurity=False)
    for _, etag in sorted(parts):
        digest.update(bytes.fromhex(etag.strip('"')))
    return f'"{digest.hexdigest()}-{len(parts)}"'


def upload_file(storage: Storage, local_path: str, relative: str, part_size: int,
                on_created: Callable[[str], None] | None = None) -> tuple[PendingUpload, str]:
    """Upload a local file as a multipart upload and do not complete it. Returns the
    pending upload and the file's checksum. On failure the upload is aborted."""
    bucket, key = bucket_key(storage, relative)
    created = _call(storage, f"create multipart upload s3://{bucket}/{key}",
                    "create_multipart_upload", Bucket=bucket, Key=key)
    upload_id = str(created["UploadId"])
    if on_created is not None:
        on_created(upload_id)
    parts: list[tuple[int, str]] = []
    crc = 0
    size = 0
    try:
        with open(local_path, "rb") as handle:
            number = 1
            while True:
                body = handle.read(part_size)
                if not body and number > 1:
                    break
                crc = zlib.crc32(body, crc)
                size += len(body)
                answer = _call(storage, f"upload part {number} of s3://{bucket}/{key}",
                               "upload_part", Bucket=bucket, Key=key, UploadId=upload_id,
                               PartNumber=number, Body=body)
                parts.append((number, str(answer["ETag"])))
                number += 1
                if len(body) < part_size:
                    break
    except BaseException:
        abort(storage, bucket, key, upload_id)
        raise
    return PendingUpload(bucket, key, upload_id, tuple(parts), size), crc32_hex(crc)


def complete(storage: Storage, pending: PendingUpload) -> None:
    """Complete a pending upload; idempotent. If-None-Match: * refuses to replace an object
    another writer put at the key; an object already there with this upload's ETag is
    this upload, completed before (a retry, or a roll forward)."""
    body = {"Parts": [{"PartNumber": n, "ETag": e} for n, e in pending.parts]}
    where = f"s3://{pending.bucket}/{pending.key}"
    try:
        _call(storage, f"complete multipart upload {where}", "complete_multipart_upload",
              Bucket=pending.bucket, Key=pending.key, UploadId=pending.upload_id,
              MultipartUpload=body, IfNoneMatch="*")
        return
    except (FileNotFoundError, FileExistsError) as exc:
        if object_etag(storage, pending.bucket, pending.key) == multipart_etag(pending.parts):
            return
        raise StorageError(f"cannot complete the upload of {where}: "
                           f"{type(exc).__name__}: {exc}") from exc


def object_etag(storage: Storage, bucket: str, key: str) -> str | None:
    """The ETag of an object, or None if there is none."""
    try:
        head = _call(storage, f"HEAD s3://{bucket}/{key}", "head_object", "HEAD",
                     Bucket=bucket, Key=key)
    except FileNotFoundError:
        return None
    return str(head.get("ETag"))


def is_completed(storage: Storage, pending: PendingUpload) -> bool:
    return object_etag(storage, pending.bucket, pending.key) == multipart_etag(pending.parts)


def abort(storage: Storage, bucket: str, key: str, upload_id: str) -> bool:
    """Abort one upload; False if it did not exist (aborted or completed before)."""
    try:
        _call(storage, f"abort multipart upload s3://{bucket}/{key}", "abort_multipart_upload",
              "DELETE", Bucket=bucket, Key=key, UploadId=upload_id)
        return True
    except FileNotFoundError:
        return False


@dataclass(frozen=True)
class Upload:
    """An in-progress multipart upload found by listing."""

    bucket: str
    key: str
    upload_id: str
    initiated: str


def list_uploads(storage: Storage, prefix: str | None = None) -> Iterator[Upload]:
    """In-progress multipart uploads under `prefix` (a key prefix; the table by default)."""
    bucket, table_key = table_prefix(storage)
    prefix = table_key if prefix is None else prefix
    marker: dict[str, str] = {}
    while True:
        page = _call(storage, f"list multipart uploads s3://{bucket}/{prefix}",
                     "list_multipart_uploads", "LIST", Bucket=bucket, Prefix=prefix, **marker)
        for item in page.get("Uploads", []) or []:
            yield Upload(bucket, str(item["Key"]), str(item["UploadId"]),
                         str(item.get("Initiated", "")))
        if not page.get("IsTruncated"):
            return
        marker = {"KeyMarker": page.get("NextKeyMarker", ""),
                  "UploadIdMarker": page.get("NextUploadIdMarker", "")}


def abort_many(storage: Storage, uploads: list[tuple[str, str, str]], threads: int) -> int:
    """Abort (bucket, key, upload id) triples in parallel; returns how many existed."""
    if not uploads:
        return 0
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(uploads)))) as pool:
        results = list(pool.map(lambda u: abort(storage, *u), uploads))
    return sum(results)
