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


def make_folders(folder: str, within: str | None = None) -> list[str]:
    """Create `folder` and the folders above it that are missing (with `within`, only
    those below `within`, which must exist: FileNotFoundError otherwise); the folders this
    call made, outermost first. If one cannot be made (a path over the filesystem's limit,
    a full disk), the ones made before it are removed again: a refused write leaves no
    tree behind (a tree deeper than a listing's bound would stop every later rollback)."""
    if within is None:
        missing = []
        current = folder.rstrip("/") or folder
        while not os.path.isdir(current):
            missing.append(current)
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        todo = missing[::-1]
    else:
        within = within.rstrip("/")
        todo, current = [], within
        for part in folder[len(within):].strip("/").split("/"):
            if part:
                current = f"{current}/{part}"
                todo.append(current)
    made: list[str] = []
    try:
        for path in todo:
            try:
                os.mkdir(path)
            except FileExistsError:
                continue
            made.append(path)
    except BaseException:
        remove_folders(made)
        raise
    return made


def remove_folders(made: list[str]) -> None:
    """Remove folders :func:`make_folders` made (innermost first), each only while empty:
    another writer may have put a file in one since."""
    for path in reversed(made):
        try:
            os.rmdir(path)
        except OSError:
            return  # not empty (or gone): the folders above it stay too


def _write_temp(path: str, data: bytes, within: str | None = None) -> tuple[str, list[str]]:
    """A complete temporary file beside `path` (the folders made on the way: the caller
    removes them if it gives up)."""
    folder = os.path.dirname(path)
    # The start of the name (64 bytes at most): a name up to the filesystem's limit fits.
    stem = os.path.basename(path).encode()[:64].decode(errors="ignore")
    tmp = os.path.join(folder, f".{stem}.{uuid.uuid4().hex}.tmp")
    attempts = 3
    while True:
        attempts -= 1
        made = make_folders(folder, within)
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            return tmp, made
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            remove_folders(made)
            # A folder on the way that another refused write made, and removed again
            # meanwhile: made again (unless `within` itself is gone).
            again = isinstance(exc, FileNotFoundError) and attempts > 0 and (
                within is None or os.path.isdir(within))
            if not again:
                raise


def local_atomic_replace(path: str, data: bytes, within: str | None = None) -> None:
    tmp, made = _write_temp(path, data, within)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        remove_folders(made)
        raise
    fsync_dir(os.path.dirname(path))


def local_create_exclusive(path: str, data: bytes, within: str | None = None) -> None:
    tmp, made = _write_temp(path, data, within)
    try:
        os.link(tmp, path)  # fails with FileExistsError if the name is taken
    except BaseException:
        os.unlink(tmp)
        remove_folders(made)
        raise
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
