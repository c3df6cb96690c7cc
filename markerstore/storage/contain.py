"""Containment: every path :class:`~markerstore.storage.Storage` reads, writes or deletes
is in the table.

One rule, checked by Storage itself before each request, so no caller can forget it:

* **Local disk**: a path is in the table when its folder, with every symbolic link on the
  way resolved, is the table's real root or under it; and, for a read or a write, when the
  path itself is no link leading out. A delete may remove a link itself (that never
  touches what it leads to), but never goes through a folder that leads out.
* **Object stores and memory** have no links: a path is in the table when it is under the
  root's prefix and has no ``.`` or ``..`` segment (some S3-compatible stores resolve
  them).

A path out of the table is a :class:`~markerstore.errors.CorruptTableError` naming the
table and the path, raised before the request is made.

Nothing is remembered between requests, so a folder that becomes a link while a process
holds the table is caught at its next request. Cost: on local disk one ``lstat`` per
path component below the table's root, up to the first that does not exist (what is
above the root is not the table's: the root's real path is resolved once), about 20 us
of CPU a request, under 1% of creating a direct marker (fsynced); elsewhere a string
comparison. Never a storage request.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator

from markerstore.errors import CorruptTableError, StorageError

# What the filesystem says of a path it cannot take, whatever is stored: one line naming
# the path (a StorageError), never a raw OSError.
PATH_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL, errno.EILSEQ})
MAX_SHOWN = 120  # characters of a path shown in an error


def shown(path: str) -> str:
    """A path short enough for a one-line error (its start and its end)."""
    if len(path) <= MAX_SHOWN:
        return repr(path)
    return repr(f"{path[:MAX_SHOWN // 2]}…{path[-MAX_SHOWN // 2:]}") + f" ({len(path)} chars)"


def path_error(path: str, exc: OSError) -> StorageError:
    """The storage error for a path the filesystem refuses (a segment over its name limit,
    too many links, bytes it cannot store): one line naming the path and the rule."""
    if exc.errno == errno.ENAMETOOLONG:
        longest = max(path.split("/"), key=lambda s: len(s.encode(errors="replace")))
        size = len(longest.encode(errors="replace"))
        why = (f"a path segment of {size} bytes ({shown(longest)}) is over the filesystem's "
               "limit (usually 255 bytes a name)" if size > 255 else
               f"the path is {len(path.encode(errors='replace'))} bytes, over the "
               "filesystem's limit (usually 4096)")
    else:
        why = exc.strerror or type(exc).__name__
    error = StorageError(f"{shown(path)}: {why}")
    error.errno = exc.errno
    return error


@contextlib.contextmanager
def path_errors(path: str) -> Iterator[None]:
    """Around local file calls made outside Storage (a staging folder, pyarrow's own
    files): a path the filesystem refuses is :func:`path_error`'s StorageError."""
    try:
        yield
    except OSError as exc:
        if exc.errno in PATH_ERRNOS and not isinstance(exc, StorageError):
            raise path_error(path, exc) from None
        raise


class Containment:
    """The containment rule for one table root."""

    def __init__(self, root: str, *, local: bool, source: str) -> None:
        self.root = root
        self.local = local
        self.source = source  # names the table in errors
        self._prefix = root.rstrip("/") + "/"
        self._real_root: str | None = None

    def check(self, path: str, *, follow: bool = True) -> None:
        """CorruptTableError unless `path` is in the table. `follow`: the path itself may
        not be a link leading out (reads, writes; a delete removes a link itself)."""
        path = path.rstrip("/") or path
        if path == self.root:
            return
        if not self.local:
            self._check_prefix(path)
            return
        real = self._resolve(path, follow)
        if real is not None:
            raise CorruptTableError(self.source, f"{path!r} resolves outside the table (to "
                                                 f"{real}: a symbolic link or '..' leads out)")

    def check_all(self, paths: Iterable[str], *, follow: bool = False) -> None:
        """`check` for many paths, each folder resolved once. Without `follow` (deletes) a
        path may be a link itself: the delete removes the link, not what it leads to."""
        seen: set[str] = set()
        for path in paths:
            folder = os.path.dirname(path.rstrip("/")) if self.local else path
            if folder not in seen:
                seen.add(folder)
                self.check(path, follow=follow)
            elif follow and os.path.islink(path):
                self.check(path)

    def _real_base(self) -> str:
        if self._real_root is not None:
            return self._real_root
        real = os.path.realpath(self.root)
        if os.path.isdir(self.root):
            self._real_root = real  # the root exists: it resolves the same from now on
        return real

    def _inside(self, real: str) -> bool:
        base = self._real_base()
        return real == base or real.startswith(base.rstrip(os.sep) + os.sep)

    def _resolve(self, path: str, follow: bool) -> str | None:
        """Where `path` leads if that is outside the table, else None. Below the root each
        component is looked at (one lstat each) and a link among them resolved: what is
        above the root is not the table's, and resolves once."""
        parts = path[len(self._prefix):].split("/")
        if not path.startswith(self._prefix) or any(p in ("", ".", "..") for p in parts):
            try:
                real = os.path.realpath(path if follow else os.path.dirname(path))
            except OSError as exc:
                raise path_error(path, exc) from None
            return None if self._inside(real) else real
        current = self._real_base().rstrip(os.sep)
        for part in parts if follow else parts[:-1]:
            current = f"{current}{os.sep}{part}"
            try:
                mode = os.lstat(current).st_mode
            except (FileNotFoundError, NotADirectoryError):
                return None  # nothing deeper exists: no link to follow
            except OSError as exc:
                raise path_error(path, exc) from None
            if stat.S_ISLNK(mode):
                current = os.path.realpath(current)
                if not self._inside(current):
                    return current
        return None

    def _check_prefix(self, path: str) -> None:
        if not path.startswith(self._prefix):
            raise CorruptTableError(self.source, f"{path!r} is not under the table's prefix "
                                                 f"{self._prefix!r}")
        rest = path[len(self._prefix):]
        if "/." in "/" + rest and any(s in (".", "..") for s in rest.split("/")):
            raise CorruptTableError(self.source, f"{path!r} has a '.' or '..' segment: it "
                                                 "may resolve outside the table")
