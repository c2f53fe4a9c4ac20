"""Imported lazily inside a simulation by tests/dst/test_guards_sources.py: starts a thread."""

import threading

threading.Thread(target=lambda: None).start()
