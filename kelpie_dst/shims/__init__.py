"""Simulated stand-ins for kelpie_agent's ports (today: storage)."""

from ._storage import SimKV as SimKV
from ._storage import SimKVStore as SimKVStore
from ._storage_faults import FaultyKV as FaultyKV
from ._storage_faults import open_kv as open_kv

__all__ = ["FaultyKV", "SimKV", "SimKVStore", "open_kv"]
