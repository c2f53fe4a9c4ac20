"""Range reads for ``kv_write_skew`` (``scans = 1``, the ``kv_scans`` scenario).

Point reads (``get``) are what the plain scenario's transactions do; an application reads
ranges too (a history newest first, an index page), and a range read is where optimistic
validation and read-your-writes are easiest to get wrong. With ``scans``:

* a *withdraw* reads its pair with one newest-first scan with a limit,
  ``scan_prefix(b"p<n>.", limit=2, reverse=True)`` (``p<n>.y`` then ``p<n>.x``), so the
  serializability checker (:mod:`._kv_serial`) judges what the store validated for a limited
  reverse range: a commit that lands on a key the scan returned must be a conflict;
* every transaction also toggles its client's own flag key (``q<client>.flag``: deleted if it
  was there, set if not) and then scans the client's prefix: the scan must show the flag
  exactly when the transaction itself just set it (read-your-writes, deletes included). A
  client runs one transaction at a time, so the flag never conflicts with anyone else.

With ``scans = 2`` (the ``kv_scans_both_ways`` scenario) a withdraw scans its pair oldest
first or newest first (a coin toss per transaction: ``scan_prefix(b"p<n>.", limit=2)`` returns
``p<n>.x`` then ``p<n>.y``, so a limit that cuts at the last row it returned is judged in both
directions), and after toggling its flag a transaction also reads the flag back with ``get``:
a point read of a key the transaction deleted must find nothing, one it set must find what it
set (read-your-writes for point reads, deletes included).

:func:`check_own_writes` is the pure check over what the clients recorded.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from kelpie_agent.storage import Transaction

from ._kv_serial import parse_value

__all__ = ["OwnWrite", "check_own_writes", "read_pair", "toggle_flag"]


async def read_pair(
    tx: Transaction, pair: int, initial: int, *, forward: bool = False
) -> dict[str, tuple[str, int]]:
    """``{key: (writer, number)}`` of the pair's counters from one limited scan, newest first
    unless ``forward`` (a counter never written is missing from the scan: the initial
    version)."""
    rows = await tx.scan_prefix(f"p{pair}.".encode(), limit=2, reverse=not forward)
    found = {key.decode(): value for key, value in rows}
    return {key: parse_value(found.get(key), initial) for key in (f"p{pair}.x", f"p{pair}.y")}


@attrs.frozen
class OwnWrite:
    """What one transaction did to its client's flag key (``set`` or ``deleted``) and whether
    its own scan of the client's keys right after listed the key; with ``read_back``, what a
    ``get`` of the key then returned (``got``: None for nothing)."""

    txn: str
    key: str
    did: str
    listed: bool
    read_back: bool = False
    got: str | None = None


async def toggle_flag(
    tx: Transaction, client: int, txn_id: str, *, read_back: bool = False
) -> OwnWrite:
    """Flip the client's flag key, then scan the client's keys (and with ``read_back``, read
    the key itself again)."""
    prefix = f"q{client}.".encode()
    key = prefix + b"flag"
    present = await tx.get(key) is not None
    if present:
        await tx.delete(key)
    else:
        await tx.set(key, txn_id.encode())
    listed = key in [k for k, _ in await tx.scan_prefix(prefix)]
    did = "deleted" if present else "set"
    if not read_back:
        return OwnWrite(txn_id, key.decode(), did, listed)
    raw = await tx.get(key)
    got = None if raw is None else raw.decode()
    return OwnWrite(txn_id, key.decode(), did, listed, read_back=True, got=got)


def check_own_writes(records: Iterable[OwnWrite]) -> list[str]:
    """Read-your-writes: a transaction's scan lists a key it set and not one it deleted; its
    ``get`` of the key (``read_back``) finds what it set, and nothing after a delete."""
    problems = []
    for r in records:
        if r.listed != (r.did == "set"):
            problems.append(
                f"{r.txn} {r.did} {r.key}, then its own scan "
                + ("did not list it" if r.did == "set" else "still listed it")
            )
        expected = r.txn if r.did == "set" else None
        if r.read_back and r.got != expected:
            problems.append(
                f"{r.txn} {r.did} {r.key}, then its own get found {r.got!r}, not {expected!r}"
            )
    return problems
