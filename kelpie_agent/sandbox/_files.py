"""File tools confined to a real directory (ProcessSandbox's working area).

Two fences, so that neither a crafted path nor a command racing the tool can reach outside:

1. The path is resolved (``os.path.realpath``: symlinks followed, ``..`` applied) and must land
   inside the root; otherwise ``PathOutsideSandboxError``.
2. The resolved path is then opened one component at a time from a descriptor of the root with
   ``O_NOFOLLOW`` (``openat``), so a symlink swapped in after the check is refused instead of
   followed. Files are opened ``O_NONBLOCK`` and must be regular files, so a FIFO or a device
   planted by a command cannot block or surprise the tool.

The I/O is synchronous (no threads in kelpie_agent); it is bounded by the file size limit.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

from ._checks import file_too_large
from ._errors import PathOutsideSandboxError, SandboxFileError

__all__ = ["Owner", "list_dir", "read_file", "write_file"]

Owner = tuple[int, int] | None  # (uid, gid) given to what the server creates, or None: its own

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _outside(path: str, root: str) -> PathOutsideSandboxError:
    return PathOutsideSandboxError(
        f"path {path!r} leads outside the sandbox working directory {root}"
    )


def _relative_parts(root: str, path: str) -> tuple[str, ...]:
    """The components of ``path`` below ``root`` once resolved; refuse anything outside."""
    real = os.path.realpath(os.path.join(root, path))  # join keeps an absolute ``path`` as is
    if real == root:
        return ()
    if not real.startswith(root + os.sep):
        raise _outside(path, root)
    return tuple(real[len(root) + 1 :].split(os.sep))


def _fail(path: str, root: str, error: OSError) -> Exception:
    if error.errno == errno.ELOOP:  # a symlink appeared after the check: refuse, never follow
        return _outside(path, root)
    if error.errno == errno.ENOENT:
        return SandboxFileError(f"no such file or directory in the sandbox: {path!r}")
    if error.errno == errno.ENOTDIR:
        return SandboxFileError(f"not a directory in the sandbox: {path!r}")
    return SandboxFileError(f"{path!r}: {error.strerror or error}")


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextmanager
def _open_dir(
    root: str, parts: tuple[str, ...], path: str, create: bool, owner: Owner = None
) -> Iterator[int]:
    fd = os.open(root, _DIR)
    try:
        for part in parts:
            try:
                if create:
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                    else:
                        if owner is not None:
                            os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
                child = os.open(part, _DIR, dir_fd=fd)
            except OSError as error:
                if error.errno == errno.ENOTDIR and _is_link(part, fd):
                    raise _outside(path, root) from None  # O_DIRECTORY|O_NOFOLLOW on a link
                raise _fail(path, root, error) from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def _check_regular(path: str, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise SandboxFileError(f"is a directory in the sandbox: {path!r}")
    if not stat.S_ISREG(mode):
        raise SandboxFileError(f"not a regular file in the sandbox: {path!r}")


def read_file(root: str, path: str, limit: int) -> bytes:
    parts = _relative_parts(root, path)
    if not parts:
        raise SandboxFileError(f"is a directory in the sandbox: {path!r}")
    with _open_dir(root, parts[:-1], path, create=False) as dir_fd:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | _FILE, dir_fd=dir_fd)
        except OSError as error:
            raise _fail(path, root, error) from None
        try:
            info = os.fstat(fd)
            _check_regular(path, info.st_mode)
            if info.st_size > limit:
                raise file_too_large(path, info.st_size, limit)
            chunks: list[bytes] = []
            size = 0
            while chunk := os.read(fd, 1 << 20):
                size += len(chunk)
                if size > limit:  # it grew while we read
                    raise file_too_large(path, size, limit)
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)


def write_file(root: str, path: str, data: bytes, limit: int, owner: Owner = None) -> None:
    if len(data) > limit:
        raise file_too_large(path, len(data), limit)
    parts = _relative_parts(root, path)
    if not parts:
        raise SandboxFileError(f"is a directory in the sandbox: {path!r}")
    name = parts[-1]
    with _open_dir(root, parts[:-1], path, create=True, owner=owner) as dir_fd:
        try:
            existing = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISLNK(existing.st_mode):
                raise _outside(path, root)
            _check_regular(path, existing.st_mode)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _FILE, 0o644, dir_fd=dir_fd)
        except OSError as error:
            raise _fail(path, root, error) from None
        try:
            _check_regular(path, os.fstat(fd).st_mode)
            if owner is not None:
                os.fchown(fd, *owner)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as error:
            raise _fail(path, root, error) from None
        finally:
            os.close(fd)


def list_dir(root: str, path: str) -> list[str]:
    parts = _relative_parts(root, path)
    with _open_dir(root, parts, path, create=False) as dir_fd:
        try:
            with os.scandir(dir_fd) as entries:
                return sorted(
                    e.name + "/" if e.is_dir(follow_symlinks=False) else e.name for e in entries
                )
        except OSError as error:
            raise _fail(path, root, error) from None
