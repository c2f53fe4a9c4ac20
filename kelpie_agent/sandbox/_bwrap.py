"""The bubblewrap command line of one ProcessSandbox command (a pure function of its settings).

What a command sees (docs/sandbox.md, "Isolation"):

* new PID, mount, network, IPC, UTS and (where possible) cgroup namespaces; the supervisor
  (``_supervisor.py``) is PID 1, so the server's processes do not exist in there, and when PID
  1 exits the kernel kills everything left;
* a root file system that is an empty, read-only tmpfs holding only: ``/usr`` and the
  ``/bin``, ``/lib``... links of merged-usr systems, the Python interpreter's prefix and the
  virtual environment (standard library and site-packages), a few harmless files of ``/etc``
  (certificates, ``ld.so.cache``, ``alternatives``...), a generated ``/etc/passwd``, a fresh
  ``/proc`` and a minimal read-only ``/dev``;
* the sandbox's own working directory, at its host path, as the only writable place;
* ``/run/kelpie`` (read-only): the sandbox's script directory (and the proxy socket).

Paths to hide (the server's data directory: its database and the other sandboxes) are
covered with an empty read-only tmpfs wherever they would show through a bound directory.

When the server runs as root, the command does not: bubblewrap keeps only ``CAP_SETUID`` and
``CAP_SETGID``, which the supervisor uses to become the sandbox's own unprivileged user (so
``RLIMIT_NPROC`` applies) and then loses. Otherwise bubblewrap makes a user namespace (so
``RLIMIT_NPROC`` counts the sandbox's processes alone, Linux 5.14+) and forbids nested ones.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

import attrs

__all__ = [
    "ETC_FILES",
    "RUN_DIR",
    "Jail",
    "find_bwrap",
    "python_roots",
]

RUN_DIR = "/run/kelpie"  # where the sandbox's run directory appears inside
HOSTNAME = "kelpie-sandbox"
ETC_FILES = (
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/protocols",
    "/etc/services",
    "/etc/ssl",
)
_TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def find_bwrap() -> str | None:
    """The bubblewrap executable on ``PATH`` (or in ``/usr/bin``), if there is one."""
    return shutil.which("bwrap") or (
        "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None
    )


def python_roots() -> tuple[str, ...]:
    """The directories the interpreter needs: its base prefix (executable and standard
    library) and, in a virtual environment, the environment (its site-packages). Those under
    ``/usr`` come with ``/usr``."""
    roots = []
    for path in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))):
        real = os.path.realpath(path)
        if real == "/usr" or real.startswith("/usr/") or real in roots:
            continue
        roots.append(real)
    # A venv's python is a link to the base interpreter: both must resolve inside.
    return tuple(sorted(root for root in roots if not any(_inside(root, o) for o in roots)))


def _inside(path: str, root: str) -> bool:
    return path != root and path.startswith(root.rstrip("/") + "/")


@attrs.frozen
class Jail:
    """Everything the bwrap command line depends on."""

    bwrap: str
    workdir: str  # bound read-write at its own path
    run_dir: str  # the sandbox's script directory, bound read-only at RUN_DIR
    roots: tuple[str, ...]  # bound read-only at their own paths
    hide: tuple[str, ...] = ()  # covered with an empty read-only tmpfs where visible
    as_root: bool = False  # the server runs as root: keep CAP_SETUID/SETGID for the supervisor

    def argv(self, command: Sequence[str], seccomp_fd: int | None = None) -> list[str]:
        """bubblewrap's command line for ``command``; ``seccomp_fd`` is an open file holding
        the filter of ``_seccomp.program()`` (passed to the process)."""
        args = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            HOSTNAME,
        ]
        if self.as_root:
            args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            args += ["--unshare-user", "--disable-userns"]
        args += ["--ro-bind", "/usr", "/usr"]
        for top in _TOP_LINKS:
            if os.path.islink(top):
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        for directory in self._ancestors():
            args += ["--perms", "0755", "--dir", directory]
        for path in ETC_FILES:
            args += ["--ro-bind-try", path, path]
        for root in self.roots:
            args += ["--ro-bind", root, root]
        args += ["--ro-bind", self.run_dir, RUN_DIR]
        for name in ("passwd", "group"):
            args += ["--ro-bind", os.path.join(self.run_dir, name), f"/etc/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        hidden = [path for path in self.hide if self._visible(path)]
        for path in hidden:
            args += ["--tmpfs", path]
        args += ["--bind", self.workdir, self.workdir]
        args += ["--remount-ro", "/", "--remount-ro", "/dev"]
        for path in hidden:
            args += ["--remount-ro", path]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += ["--chdir", self.workdir, "--", *command]
        return args

    def _ancestors(self) -> list[str]:
        """The directories above every mount point that bubblewrap would otherwise create
        0700 (so the sandbox's user could not walk through them), outermost first."""
        bound = ("/usr", *self.roots)
        found: set[str] = set()
        targets = (*ETC_FILES, "/etc/passwd", *self.roots, self.workdir, RUN_DIR, *self.hide)
        for target in targets:
            parent = os.path.dirname(target)
            while parent != "/" and not any(parent == b or _inside(parent, b) for b in bound):
                found.add(parent)
                parent = os.path.dirname(parent)
        return sorted(found, key=lambda path: (path.count("/"), path))

    def _visible(self, path: str) -> bool:
        """Whether ``path`` would show through one of the bound directories."""
        bound = ("/usr", *ETC_FILES, *self.roots)
        return os.path.isdir(path) and any(path == b or _inside(path, b) for b in bound)
