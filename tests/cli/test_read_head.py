"""topobind.inputs.read_head: the first bytes of a regular file, never a hang on a FIFO."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from topobind.inputs import read_head


def test_the_first_bytes_of_a_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    f.write_bytes(b"x" * (3 << 20))
    assert read_head(f, 10) == b"x" * 10
    assert len(read_head(f, 5 << 20)) == 3 << 20  # a shorter file: all of it


def test_a_fifo_or_a_directory_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # no writer: a blocking open would wait forever
    with pytest.raises(OSError, match="FIFO"):
        read_head(fifo, 10)
    with pytest.raises(OSError):
        read_head(tmp_path, 10)
