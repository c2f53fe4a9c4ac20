"""An in-memory filesystem: the working area of an in-process sandbox (SimSandbox).

Directories and files below one root (``/workspace``); nothing exists outside it, and nothing
can be created there. Paths are POSIX strings, resolved lexically against a current directory
(there are no symlinks). Iteration is always sorted, so nothing depends on hash order.
Errors carry the ``strerror`` a real filesystem would give, for shell-style messages.
"""

from __future__ import annotations

import posixpath
from typing import Any

import msgpack

__all__ = ["ROOT", "FsError", "MemFS"]

ROOT = "/workspace"


class FsError(Exception):
    """A filesystem call failed; ``reason`` reads like ``strerror`` ("No such file...")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


NOENT = "No such file or directory"
ISDIR = "Is a directory"
NOTDIR = "Not a directory"
EXIST = "File exists"
NOTEMPTY = "Directory not empty"
ACCES = "Permission denied"
FBIG = "File too large"


class MemFS:
    """Files (path -> bytes) and directories under :data:`ROOT`."""

    def __init__(self, root: str = ROOT, *, max_file_size: int | None = None) -> None:
        self.root = root
        self.max_file_size = max_file_size
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {root}

    def usage(self) -> int:
        """Bytes the working area counts against ``SandboxLimits.disk_bytes``: file sizes plus
        4096 per file or directory below the root (as ProcessSandbox's supervisor counts)."""
        entries = len(self.files) + len(self.dirs) - 1
        return sum(len(data) for data in self.files.values()) + 4096 * entries

    # -- paths -------------------------------------------------------------------------------

    def abspath(self, path: str, cwd: str | None = None) -> str:
        joined = posixpath.normpath(posixpath.join(cwd or self.root, path))
        return "/" + joined.lstrip("/")  # POSIX keeps a leading "//"; we do not

    def inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + "/")

    def is_dir(self, path: str) -> bool:
        return path in self.dirs

    def is_file(self, path: str) -> bool:
        return path in self.files

    def _parent_dir(self, path: str) -> str:
        parent = posixpath.dirname(path)
        if not self.inside(path) or parent not in self.dirs:
            if parent in self.files:
                raise FsError(NOTDIR)
            raise FsError(NOENT if self.inside(path) else ACCES)
        return parent

    # -- operations on absolute paths ----------------------------------------------------------

    def read(self, path: str) -> bytes:
        if path in self.dirs:
            raise FsError(ISDIR)
        data = self.files.get(path)
        if data is None:
            raise FsError(NOENT)
        return data

    def write(self, path: str, data: bytes, *, append: bool = False) -> None:
        """Create or replace (or append to) a file whose directory exists."""
        if path in self.dirs:
            raise FsError(ISDIR)
        self._parent_dir(path)
        if append:
            data = self.files.get(path, b"") + data
        if self.max_file_size is not None and len(data) > self.max_file_size:
            self.files[path] = data[: self.max_file_size]
            raise FsError(FBIG)
        self.files[path] = data

    def mkdir(self, path: str, *, parents: bool = False) -> None:
        if path in self.dirs:
            if parents:
                return
            raise FsError(EXIST)
        if path in self.files:
            raise FsError(EXIST)
        if parents and self.inside(path):
            parent = posixpath.dirname(path)
            if parent not in self.dirs:
                self.mkdir(parent, parents=True)
        self._parent_dir(path)
        self.dirs.add(path)

    def makedirs(self, path: str) -> None:
        self.mkdir(path, parents=True)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        if path in self.files:
            del self.files[path]
            return
        if path not in self.dirs:
            raise FsError(NOENT)
        if path == self.root:
            raise FsError(ACCES)
        inner = path + "/"
        below = [p for p in self.files if p.startswith(inner)]
        below_dirs = [d for d in self.dirs if d.startswith(inner)]
        if (below or below_dirs) and not recursive:
            raise FsError(NOTEMPTY)
        for p in below:
            del self.files[p]
        for d in below_dirs:
            self.dirs.discard(d)
        self.dirs.discard(path)

    def listdir(self, path: str) -> list[str]:
        """The names directly in directory ``path``, sorted; directories end with ``/``."""
        if path in self.files:
            raise FsError(NOTDIR)
        if path not in self.dirs:
            raise FsError(NOENT)
        prefix = path.rstrip("/") + "/"
        names = [p[len(prefix) :] for p in self.files if posixpath.dirname(p) == path]
        names += [
            d[len(prefix) :] + "/" for d in self.dirs if d != path and posixpath.dirname(d) == path
        ]
        return sorted(names)

    # -- snapshots -----------------------------------------------------------------------------

    def dump(self) -> bytes:
        """Everything below the root, canonically encoded (msgpack, sorted)."""
        cut = len(self.root) + 1
        dirs = sorted(d[cut:] for d in self.dirs if d != self.root)
        files = [[p[cut:], self.files[p]] for p in sorted(self.files)]
        data: bytes = msgpack.packb([1, dirs, files], use_bin_type=True)
        return data

    def load(self, payload: bytes) -> None:
        """Replace everything with a :meth:`dump`; ``ValueError`` if it is not one."""
        try:
            version, dirs, files = msgpack.unpackb(payload, raw=False, strict_map_key=True)
        except Exception as error:  # msgpack raises several unrelated types
            raise ValueError(f"not an in-memory filesystem dump: {error}") from None
        if version != 1 or not isinstance(dirs, list) or not isinstance(files, list):
            raise ValueError("not an in-memory filesystem dump (bad header)")
        new_dirs = {self.root}
        new_files: dict[str, bytes] = {}
        for entry in [*dirs, *files]:
            name: Any = entry if isinstance(entry, str) else entry[0] if entry else None
            if not isinstance(name, str) or self.abspath(name) != f"{self.root}/{name}":
                raise ValueError(f"bad path in filesystem dump: {name!r}")
        for name in dirs:
            new_dirs.add(f"{self.root}/{name}")
        for entry in files:
            if len(entry) != 2 or not isinstance(entry[1], bytes):
                raise ValueError("bad file entry in filesystem dump")
            new_files[f"{self.root}/{entry[0]}"] = entry[1]
        for path in sorted([*new_dirs, *new_files]):
            if path != self.root and posixpath.dirname(path) not in new_dirs:
                raise ValueError(f"filesystem dump has {path!r} without its directory")
        self.dirs, self.files = new_dirs, new_files
