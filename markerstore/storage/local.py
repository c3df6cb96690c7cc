"""Local-disk writes: whole files that appear atomically, in folders made on the way."""

from __future__ import annotations

import contextlib
import os
import uuid


def fsync_dir(path: str) -> None:
    """Make a local folder's entries durable (best effort where a folder cannot be
    opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _make_folder(folder: str, within: str | None) -> None:
    """Create `folder` (and its parents); with `within`, only the folders below `within`,
    which must exist (FileNotFoundError otherwise)."""
    if within is None:
        os.makedirs(folder, exist_ok=True)
        return
    within = within.rstrip("/")
    current = within
    for part in folder[len(within):].strip("/").split("/"):
        if part:
            current = f"{current}/{part}"
            with contextlib.suppress(FileExistsError):
                os.mkdir(current)


def _write_temp(path: str, data: bytes, within: str | None = None) -> str:
    folder = os.path.dirname(path)
    _make_folder(folder, within)
    # The start of the name (64 bytes at most): a name up to the filesystem's limit fits.
    stem = os.path.basename(path).encode()[:64].decode(errors="ignore")
    tmp = os.path.join(folder, f".{stem}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return tmp


def local_atomic_replace(path: str, data: bytes, within: str | None = None) -> None:
    tmp = _write_temp(path, data, within)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path))


def local_create_exclusive(path: str, data: bytes, within: str | None = None) -> None:
    tmp = _write_temp(path, data, within)
    try:
        os.link(tmp, path)  # fails with FileExistsError if the name is taken
    finally:
        os.unlink(tmp)
    fsync_dir(os.path.dirname(path))


class TooDeepError(Exception):
    """A listing met a folder deeper than its bound (`folder`: the first one)."""

    def __init__(self, folder: str) -> None:
        super().__init__(folder)
        self.folder = folder


def local_find(root: str, max_depth: int) -> list[str]:
    """Every file under the local folder `root` (a symbolic link is a file: never
    followed), by an explicit stack, so a deep tree costs memory, not the interpreter's
    recursion limit; TooDeepError at a folder more than `max_depth` below `root`. Empty if
    `root` does not exist; `[root]` if it is a file."""
    root = root.rstrip("/") or root
    if not os.path.lexists(root):
        return []
    if os.path.islink(root) or not os.path.isdir(root):
        return [root]
    found: list[str] = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if depth >= max_depth:
                            raise TooDeepError(entry.path)
                        stack.append((entry.path, depth + 1))
                    else:
                        found.append(entry.path)
        except (FileNotFoundError, NotADirectoryError):
            continue  # deleted while listed: nothing under it any more
    return found
