"""``--launcher flux``'s check of the flux it is given (launchers/flux.py ``version_of``),
through the project's process runner: a program that is not Flux's flux, prints bytes that
are not UTF-8 or cannot run is one line naming it, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from topobind.errors import TopobindError
from topobind.launch.mpi_launchers.flux import Flux

pytestmark = pytest.mark.slow  # each case starts a shell script


def _fake(tmp_path: Path, body: str) -> str:
    path = tmp_path / "flux"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_flux_version_line_is_its_version(tmp_path: Path) -> None:
    fake = _fake(tmp_path, "echo 'commands:    0.68.0'; echo 'libflux-core:  0.68.0'")
    assert Flux().version_of(fake) == "commands: 0.68.0"


@pytest.mark.parametrize(
    "body, says",
    [
        (r"printf 'commands: \377\376\n'", "commands: \ufffd\ufffd"),  # not UTF-8: replaced
        ("echo 'usage: other'", "is not Flux's flux"),
        ("exit 3", "is not Flux's flux"),
    ],
)
def test_odd_output_of_flux_version_is_not_a_traceback(
    tmp_path: Path, body: str, says: str
) -> None:
    fake = _fake(tmp_path, body)
    try:
        got = Flux().version_of(fake)
    except TopobindError as exc:
        got = str(exc)
    assert says in got and "\n" not in got


def test_a_flux_that_cannot_run_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "flux"
    path.write_text("not a program")
    path.chmod(0o644)
    with pytest.raises(TopobindError, match="flux") as info:
        Flux().version_of(str(path))
    assert "\n" not in str(info.value)
