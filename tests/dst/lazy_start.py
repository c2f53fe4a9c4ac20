"""Imported lazily inside a simulation by tests/dst/test_guards_sources.py: starts a raw thread."""

import _thread

_thread.start_new_thread(lambda: None, ())
