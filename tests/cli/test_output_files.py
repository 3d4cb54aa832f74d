"""Every option that writes a file follows one rule (:mod:`topobind.fsutil`), checked before
any work: a path that exists and is not a regular file (or a symlink to one) is refused in one
line and never replaced; '' and '-' are refused (or '-' is stdout where documented); a
directory that takes no new file (read-only, /proc) is refused up front, not after the run."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import Cli
from topo_sources import BETZY

from topobind.errors import TopobindError
from topobind.fsutil import atomic_write_text, output_dir, output_file

SMALL = "synthetic:package:1 core:2 pu:1"


# --------------------------------------------------------------------------- the helper
def test_a_regular_file_or_a_link_to_one_or_a_new_name_is_taken(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "old.json")
    for name in ("old.json", "link.json", "new.json"):
        assert output_file(tmp_path / name, "--x") == str(tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "old.json"]  # no probe


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: os.mkfifo(p), "a FIFO (named pipe)"),
        (lambda p: p.symlink_to("/dev/null"), "a character device"),
        (lambda p: p.mkdir(), "a directory"),
        (lambda p: p.symlink_to(p.parent / "nowhere"), "a dangling symbolic link"),
    ],
)
def test_a_special_file_is_refused_and_kept(
    tmp_path: Path, make: Callable[[Path], None], kind: str
) -> None:
    target = tmp_path / "out.json"
    make(target)
    before = os.lstat(target)
    with pytest.raises(TopobindError) as err:
        output_file(target, "--plan-json")
    assert str(err.value) == (
        f"cannot write --plan-json {target}: it exists and is {kind}, not a regular file "
        "(never replaced); give another --plan-json FILE"
    )
    with pytest.raises(TopobindError, match="never replaced"):
        atomic_write_text(target, "x")  # the writer holds the rule too
    assert os.lstat(target).st_mode == before.st_mode and os.lstat(target).st_ino == before.st_ino


@pytest.mark.parametrize("path", ["", "-"])
def test_empty_and_dash_are_refused(path: str) -> None:
    with pytest.raises(TopobindError, match=r"^--metrics: .*; give another --metrics FILE"):
        output_file(path, "--metrics")
    with pytest.raises(TopobindError, match=r"^--results: "):
        output_dir(path, "--results")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_pseudo_file_system_is_refused_up_front() -> None:
    with pytest.raises(TopobindError) as err:
        output_file("/proc/topobind-metrics.prom", "--metrics")
    assert str(err.value).startswith(
        "cannot write --metrics /proc/topobind-metrics.prom: directory /proc takes no new file ("
    )
    with pytest.raises(TopobindError, match="directory /proc takes no new file"):
        output_dir("/proc/topobind-results/x", "--results")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_directory_is_refused(tmp_path: Path) -> None:  # pragma: no cover (root)
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(TopobindError, match="takes no new file"):
        output_file(ro / "m.prom", "--metrics")


def test_a_directory_output_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(TopobindError, match=r"f is a regular file, not a directory"):
        output_dir(tmp_path / "f" / "results", "--results")
    assert output_dir(tmp_path / "new" / "results", "--results")  # made when written
    assert not (tmp_path / "new").exists()


# --------------------------------------------------------------------------- every option
#: option -> the command line writing to PATH (the FIFO cases are named to pass any suffix rule)
FILE_OPTIONS: dict[str, Callable[[str], list[str]]] = {
    "run --plan-json": lambda p: ["run", "-t", SMALL, "-l", "compact", "--launcher", "none",
                                  "--plan-json", p, "--", "true"],
    "plan --rankfile": lambda p: ["plan", "-t", BETZY, "-l", "every-other-core", "-f",
                                  "openmpi", "--force", "--rankfile", p],
    "draw -o": lambda p: ["draw", "-t", SMALL, "-l", "compact", "-o", p],
    "site check --metrics": lambda p: ["site", "check", "local", "--live", "--metrics", p],
    "validate --metrics": lambda p: ["validate", "--site", "local", "--metrics", p],
    "spack externals -o": lambda p: ["spack", "externals", "-o", p],
}  # fmt: skip
SUFFIX = {"draw -o": ".png", "site check --metrics": ".prom", "validate --metrics": ".prom"}
DIR_OPTIONS: dict[str, Callable[[str], list[str]]] = {
    "bench --results": lambda p: ["bench", "stream", "-t", SMALL, "--results", p],
    "report -o": lambda p: ["report", "/nonexistent-results", "-o", p],
    "validate --results": lambda p: ["validate", "--site", "local", "--results", p],
}


def _refused(out: object) -> str:
    rc, stdout, stderr = out.returncode, out.stdout, out.stderr  # type: ignore[attr-defined]
    assert rc == 2, (rc, stdout, stderr)
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("topobind: error: "), stderr
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("option", list(FILE_OPTIONS))
def test_every_file_option_refuses_a_fifo_a_device_and_a_pseudo_fs(
    option: str, tmp_path: Path, topobind_cli: Cli
) -> None:
    name = "out" + SUFFIX.get(option, ".txt")
    fifo, dev = tmp_path / name, tmp_path / "dev" / name
    os.mkfifo(fifo)
    dev.parent.mkdir()
    dev.symlink_to("/dev/null")
    argv = FILE_OPTIONS[option]
    assert "a FIFO (named pipe), not a regular file" in _refused(
        topobind_cli(*argv(str(fifo)), cwd=tmp_path, timeout=120)
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert "a character device, not a regular file" in _refused(
        topobind_cli(*argv(str(dev)), cwd=tmp_path, timeout=120)
    )
    assert os.readlink(dev) == "/dev/null"
    assert "takes no new file" in _refused(
        topobind_cli(*argv("/proc/topobind-" + name), cwd=tmp_path, timeout=120)
    )
    if option != "spack externals -o":  # '-' is its stdout, as documented
        assert "'-' is not standard output here" in _refused(
            topobind_cli(*argv("-"), cwd=tmp_path, timeout=120)
        )
    _refused(topobind_cli(*argv(""), cwd=tmp_path, timeout=120))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "dev"])


@pytest.mark.slow
@pytest.mark.parametrize("option", list(DIR_OPTIONS))
def test_every_directory_option_refuses_a_fifo_and_a_pseudo_fs(
    option: str, tmp_path: Path, topobind_cli: Cli
) -> None:
    fifo = tmp_path / "results"
    os.mkfifo(fifo)
    argv = DIR_OPTIONS[option]
    assert "is a FIFO (named pipe), not a directory" in _refused(
        topobind_cli(*argv(str(fifo)), cwd=tmp_path, timeout=120)
    )
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert "takes no new file" in _refused(
        topobind_cli(*argv("/proc/topobind-results"), cwd=tmp_path, timeout=120)
    )
    _refused(topobind_cli(*argv(""), cwd=tmp_path, timeout=120))
    assert [p.name for p in tmp_path.iterdir()] == ["results"]


@pytest.mark.slow
def test_spack_externals_dash_is_stdout(tmp_path: Path, topobind_cli: Cli) -> None:
    out = topobind_cli("spack", "externals", "-o", "-", cwd=tmp_path, timeout=120)
    assert out.returncode == 0 and "\npackages:\n" in out.stdout, out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_write_that_fails_is_one_line() -> None:
    """The writers themselves: an OSError (a full disk, /proc) is a TopobindError of one line,
    never a traceback after the work."""
    from topobind.validation import metrics

    with pytest.raises(TopobindError, match=r"^cannot write /proc/topobind-x\.json: "):
        atomic_write_text("/proc/topobind-x.json", "{}")
    with pytest.raises(TopobindError, match=r"^cannot write --metrics /proc/m\.prom: "):
        metrics.write("/proc/m.prom", "x 1\n")


def test_a_file_whose_writer_makes_its_folder(tmp_path: Path) -> None:
    """Calibrate's references of a shipped site go to the user's folder, made when written:
    a folder not there yet is taken where its nearest parent takes files (the installed
    package's first calibrate was refused, 'does not exist; create it'), and still refused
    under a pseudo file system or a file."""
    new = tmp_path / "config" / "topobind" / "sites" / "local" / "references.yaml"
    with pytest.raises(TopobindError, match="does not exist"):
        output_file(new, "references file")
    assert output_file(new, "references file", made=True) == str(new)
    assert not new.parent.exists()  # checked, not made
    (tmp_path / "f").write_text("")
    with pytest.raises(TopobindError, match="not a directory"):
        output_file(tmp_path / "f" / "x" / "references.yaml", "references file", made=True)
    with pytest.raises(TopobindError, match="cannot write"):
        output_file("/proc/topobind/x/references.yaml", "references file", made=True)
