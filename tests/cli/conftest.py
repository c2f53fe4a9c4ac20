import pytest


@pytest.fixture(autouse=True)
def _pinned_hashseed_label(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process CLI runs label their replay lines with this process's PYTHONHASHSEED, and
    refuse to when it is random (as pytest's usually is). These workloads do not depend on
    string hashing, so the tests claim 0; the subprocess tests check the real thing."""
    monkeypatch.setenv("PYTHONHASHSEED", "0")
