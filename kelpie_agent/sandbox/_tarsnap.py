"""ProcessSandbox snapshots: the working directory as a tar, restored by swapping directories.

Packing keeps regular files, directories, and symlinks that stay inside the working directory
(others, and FIFOs or devices, are skipped); owners are dropped so a snapshot does not depend on
who took it, and members are added in sorted order. Unpacking goes through ``tarfile``'s
``data`` filter (no absolute paths, no ``..``, no links or special files leading anywhere odd),
into a staging directory that then replaces the working directory with two renames, so a failed
restore leaves the working directory exactly as it was.
"""

from __future__ import annotations

import io
import os
import posixpath
import shutil
import tarfile
import tempfile

from ._errors import RestoreError, SnapshotError

__all__ = ["pack", "unpack"]


def _member(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    if info.issym():
        target = posixpath.normpath(posixpath.join(posixpath.dirname(info.name), info.linkname))
        if posixpath.isabs(info.linkname) or target == ".." or target.startswith("../"):
            return None
    elif not (info.isfile() or info.isdir() or info.islnk()):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def pack(workdir: str) -> bytes:
    """A tar of everything under ``workdir`` (member names relative to it)."""
    buffer = io.BytesIO()
    try:
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(os.listdir(workdir)):
                tar.add(os.path.join(workdir, name), arcname=name, filter=_member)
    except (OSError, tarfile.TarError) as error:
        raise SnapshotError(f"could not pack the working directory: {error}") from error
    return buffer.getvalue()


def _chown_tree(top: str, owner: tuple[int, int]) -> None:
    os.chown(top, *owner)
    for directory, names, files in os.walk(top):
        for name in names + files:
            os.chown(os.path.join(directory, name), *owner, follow_symlinks=False)


def unpack(base: str, workdir: str, payload: bytes, owner: tuple[int, int] | None = None) -> None:
    """Replace ``workdir`` (a child of ``base``) with the tar ``payload``'s contents (owned by
    ``owner``, a ``(uid, gid)``, when given)."""
    mode = os.stat(workdir).st_mode & 0o7777
    staging = tempfile.mkdtemp(prefix="restore-", dir=base)
    try:
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:") as tar:
            tar.extractall(staging, filter="data")
        os.chmod(staging, mode)
        if owner is not None:
            _chown_tree(staging, owner)
    except (OSError, tarfile.TarError) as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise RestoreError(f"could not unpack the snapshot: {error}") from error
    old = tempfile.mkdtemp(prefix="replaced-", dir=base)
    try:
        os.rename(workdir, os.path.join(old, "work"))
        os.rename(staging, workdir)
    except OSError as error:  # put things back as they were
        if not os.path.exists(workdir):
            os.rename(os.path.join(old, "work"), workdir)
        shutil.rmtree(staging, ignore_errors=True)
        raise RestoreError(f"could not swap in the restored directory: {error}") from error
    finally:
        shutil.rmtree(old, ignore_errors=True)
