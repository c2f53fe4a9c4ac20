"""Dspeed-17: a run's SQLite files live on a RAM file system when there is a roomy one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kelpie_dst.shims import _sqlite_disk
from kelpie_dst.shims._sqlite_disk import SqliteFiles, files_root


def test_a_roomy_ram_directory_holds_the_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_sqlite_disk, "RAM_DIRECTORY", str(tmp_path))
    monkeypatch.setattr(_sqlite_disk, "RAM_NEEDED", 1)
    assert files_root() == str(tmp_path)
    files = SqliteFiles()
    try:
        assert os.path.dirname(files.directory) == str(tmp_path)
    finally:
        files.close()
    assert not os.path.exists(files.directory)


def test_without_room_or_without_the_directory_the_temp_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_sqlite_disk, "RAM_DIRECTORY", str(tmp_path))
    monkeypatch.setattr(_sqlite_disk, "RAM_NEEDED", 1 << 62)
    assert files_root() is None
    monkeypatch.setattr(_sqlite_disk, "RAM_DIRECTORY", str(tmp_path / "absent"))
    monkeypatch.setattr(_sqlite_disk, "RAM_NEEDED", 1)
    assert files_root() is None
