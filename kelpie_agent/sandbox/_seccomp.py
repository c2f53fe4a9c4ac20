"""A small seccomp filter for sandboxed commands: no new namespaces, no rarely needed kernel
interfaces.

bubblewrap loads it (``--seccomp FD``) before it starts the supervisor, so it holds for every
process of the sandbox. It answers ``EPERM`` to ``unshare`` and to a ``clone`` asking for any new
namespace, ``ENOSYS`` to ``clone3`` (whose flags a filter cannot read; the C library then falls
back to ``clone``), and ``EPERM`` to ``bpf``, ``perf_event_open``, ``userfaultfd``,
``io_uring_setup``, ``keyctl``, ``add_key`` and ``request_key``: kernel attack surface a tool
has no use for. Everything else is allowed. Without it a tool could make a user namespace of
its own, holding every capability there; that gives it no more of the host than it sees, but
puts much more of the kernel within its reach.

The program is classic BPF over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at 4,
``args[0]`` at 16), for x86-64 and AArch64; every call made through another ABI (i386's
``int 0x80``, x32) is refused; on another architecture there is no filter
(:func:`program` returns ``None``) and the namespaces alone isolate.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["program"]

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
# seccomp return values
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000
_NEW_NAMESPACES |= 0x40000000

_ARCHES = {  # machine: (AUDIT_ARCH_*, {name: number})
    "x86_64": (
        0xC000003E,
        {
            "unshare": 272,
            "clone": 56,
            "clone3": 435,
            "bpf": 321,
            "perf_event_open": 298,
            "userfaultfd": 323,
            "io_uring_setup": 425,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "unshare": 97,
            "clone": 220,
            "clone3": 435,
            "bpf": 280,
            "perf_event_open": 241,
            "userfaultfd": 282,
            "io_uring_setup": 425,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
        },
    ),
}
_REFUSED = (
    "unshare",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "keyctl",
    "add_key",
    "request_key",
)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one's), as bubblewrap reads it; ``None`` for an
    architecture it does not know."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit, numbers = arch
    refused = [numbers[name] for name in _REFUSED]
    # Instructions, with jumps to labels resolved below (BPF jumps count from the next one).
    code: list[tuple[int, int, str | None, str | None]] = [
        (_LD_W_ABS, 4, None, None),
        (_JEQ_K, audit, None, "eperm"),  # another ABI (i386's int 0x80): refused outright
        (_LD_W_ABS, 0, None, None),
        (_JGE_K, 0x40000000, "eperm", None),  # x32 numbering on x86-64
        *((_JEQ_K, number, "eperm", None) for number in refused),
        (_JEQ_K, numbers["clone3"], "enosys", None),
        (_JEQ_K, numbers["clone"], None, "allow"),
        (_LD_W_ABS, 16, None, None),  # clone's args[0], low word: its flags
        (_JSET_K, _NEW_NAMESPACES, "eperm", "allow"),
    ]
    labels = {"allow": len(code), "eperm": len(code) + 1, "enosys": len(code) + 2}
    code += [
        (_RET_K, _ALLOW, None, None),
        (_RET_K, _ERRNO | errno.EPERM, None, None),
        (_RET_K, _ERRNO | errno.ENOSYS, None, None),
    ]
    ops = []
    for index, (opcode, k, jt, jf) in enumerate(code):
        true = labels[jt] - index - 1 if jt else 0
        false = labels[jf] - index - 1 if jf else 0
        assert true >= 0 and false >= 0, "BPF jumps only forward"
        ops.append(_op(opcode, k, true, false))
    return b"".join(ops)
