"""Fixtures shared with the storage tests: a throwaway PostgreSQL cluster."""

from tests.storage.conftest import postgres_dsn as postgres_dsn
