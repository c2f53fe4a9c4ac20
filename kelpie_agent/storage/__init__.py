"""The storage port: an ordered byte-key/byte-value map with serializable transactions.

kelpie_agent reaches storage only through :class:`KV`; production uses :class:`SqliteKV` (one
file, the default) or :class:`PostgresKV` (shared by several servers), and simulation uses
``kelpie_dst.shims.SimKV``. See docs/storage.md.
"""

from typing import TYPE_CHECKING

from ._errors import ChecksumError as ChecksumError
from ._errors import ConflictError as ConflictError
from ._errors import StorageError as StorageError
from ._errors import StorageUnavailableError as StorageUnavailableError
from ._keys import MAX_KEY_SIZE as MAX_KEY_SIZE
from ._port import KV as KV
from ._port import KVOps as KVOps
from ._port import Transaction as Transaction
from ._sqlite import SqliteKV as SqliteKV

if TYPE_CHECKING:
    from ._postgres import PostgresKV as PostgresKV

__all__ = [
    "KV",
    "MAX_KEY_SIZE",
    "ChecksumError",
    "ConflictError",
    "KVOps",
    "PostgresKV",
    "SqliteKV",
    "StorageError",
    "StorageUnavailableError",
    "Transaction",
]


def __getattr__(name: str) -> object:
    # psycopg takes ~0.2 s to import; only pay for it when PostgresKV is actually used.
    if name == "PostgresKV":
        from ._postgres import PostgresKV

        return PostgresKV
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
