"""The `topobind show` and `topobind plan` commands as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND, Cli
from paths import TOPOLOGIES
from topo_sources import BETZY

from topobind.emit.omp import parse_places
from topobind.plan.model import validate_plan_json


@pytest.mark.slow
def test_show_text_and_json(topobind_cli: Cli) -> None:
    out = topobind_cli("show", "-t", BETZY)
    assert out.returncode == 0
    assert "2 packages, 8 NUMA nodes, 32 L3 domains, 128 cores, 256 PUs (SMT 2)" in out.stdout
    assert "L3 L#1 (16 MiB, NUMA 0): cores L#4-7, PUs 4-7,132-135" in out.stdout
    doc = json.loads(topobind_cli("show", "-t", BETZY, "-f", "json").stdout)
    assert doc["summary"]["pus"] == 256 and len(doc["l3_domains"]) == 32


@pytest.mark.slow
def test_plan_json_validates_and_matches_issue_example(topobind_cli: Cli) -> None:
    out = topobind_cli("plan", "-t", BETZY, "-l", "every-other-core", "-r", "64", "-f", "json")
    doc = json.loads(out.stdout)
    validate_plan_json(doc)
    assert [r["cpus"] for r in doc["ranks"]] == [[i] for i in range(0, 128, 2)]
    assert doc["launch"]["env"]["OMP_NUM_THREADS"] == "1"
    assert doc["launch"]["srun"][2].startswith("--cpu-bind=mask_cpu:0x1,0x4,")
    assert not any(
        a.startswith(("--cpus-per-task", "-c", "--exact")) for a in doc["launch"]["srun"]
    )


@pytest.mark.slow
def test_plan_env_is_sourceable_and_exact(topobind_cli: Cli) -> None:
    out = topobind_cli(
        "plan", "-t", BETZY, "-l", "every-other-core", "-r", "1", "-T", "64", "-f", "env"
    )
    script = out.stdout + 'printf "%s|%s|%s" "$OMP_NUM_THREADS" "$OMP_PLACES" "$OMP_PROC_BIND"'
    got = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout
    threads, places, bind = got.split("|")
    assert (threads, bind) == ("64", "close")
    assert parse_places(places) == [(i,) for i in range(0, 128, 2)]


@pytest.mark.slow
def test_openmpi_format_writes_rankfile_only_when_needed(tmp_path: Path, topobind_cli: Cli) -> None:
    out = topobind_cli("plan", "-t", BETZY, "-l", "per-l3", "-f", "openmpi", cwd=tmp_path)
    assert out.stdout.strip() == "mpirun -np 32 --map-by ppr:1:l3cache:pe=4 --bind-to core"
    assert not list(tmp_path.iterdir())
    out = topobind_cli("plan", "-t", BETZY, "-l", "every-other-core", "-f", "openmpi", cwd=tmp_path)
    assert "rankfile:file=topobind.rankfile" in out.stdout
    text = (tmp_path / "topobind.rankfile").read_text()
    assert "rank 63=localhost slot=126" in text


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,message",
    [
        (["-l", "zigzag"], "unknown layout 'zigzag'"),
        (["-l", "compact", "-r", "100", "-T", "2"], "lower --ranks/--threads"),
        (["-l", "compact", "-r", "200"], "--ranks 200 is more than the 128 usable cores"),
        (
            ["-l", "per-l3", "-t", str(TOPOLOGIES / "16-2gr2gr2n2c+misc.xml")],
            "needs a cache shared",
        ),
        (["-l", "compact", "-t", "/nonexistent/node.xml"], "does not exist"),
        (["-l", "l3-groups:x"], "must be a whole number"),
        (["-l", "compact", "-r", "0"], "--ranks/-r: '0': give a whole number from 1"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(
    args: list[str], message: str, tmp_path: Path, topobind_cli: Cli
) -> None:
    out = (
        topobind_cli("plan", "-t", BETZY, *args, "-f", "openmpi", cwd=tmp_path)
        if "-t" not in args
        else topobind_cli("plan", *args, "-f", "openmpi", cwd=tmp_path)
    )
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topobind: error: ") and message in lines[0]
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_malformed_and_empty_xml(tmp_path: Path, topobind_cli: Cli) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<topology><object type='Machine'")
    out = topobind_cli("show", "-t", str(bad))
    assert out.returncode == 2 and "malformed hwloc XML" in out.stderr
    empty = tmp_path / "empty.xml"
    src = (TOPOLOGIES / "2intel64-1n2c-numaroot.v1tov2.xml").read_text()
    empty.write_text(src.replace('allowed_cpuset="0x00000003"', 'allowed_cpuset="0x0"'))
    out = topobind_cli("show", "-t", str(empty))
    assert out.returncode == 2 and "allowed cpuset is empty" in out.stderr


@pytest.mark.slow
def test_live_in_restricted_cpuset() -> None:
    """Inside a job step bound to one PU, the live topology holds only that PU."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 PUs")
    out = subprocess.run(
        ["taskset", "-c", "1", TOPOBIND, "plan", "-l", "compact", "-f", "json"],
        capture_output=True,
        text=True,
    )
    doc = json.loads(out.stdout)
    assert [r["cpus"] for r in doc["ranks"]] == [[1]]
    assert doc["topology"]["excluded_pus"] == {"0": "not in this process's affinity mask"}


def test_atomic_write_gives_the_usual_file_mode(tmp_path: Path) -> None:
    from topobind.fsutil import atomic_write_text

    old = os.umask(0o022)
    try:
        path = Path(atomic_write_text(tmp_path / "x.txt", "hello\n"))
    finally:
        os.umask(old)
    assert path.read_text() == "hello\n"
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


@pytest.mark.slow
def test_rankfile_in_a_missing_directory_is_refused(tmp_path: Path, topobind_cli: Cli) -> None:
    target = tmp_path / "no" / "such" / "rf"
    out = topobind_cli(
        "plan", "-t", BETZY, "-l", "every-other-core", "-f", "openmpi", "--rankfile", str(target)
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        f"topobind: error: cannot write rankfile {target}: directory {target.parent} does not "
        "exist; create it or give another --rankfile PATH"
    ]
    assert not (tmp_path / "no").exists()
    out = topobind_cli(
        "plan", "-t", BETZY, "-l", "every-other-core", "-f", "openmpi4", "--rankfile", "/"
    )
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1


@pytest.mark.slow
def test_openmpi_formats_print_their_notes(tmp_path: Path, topobind_cli: Cli) -> None:
    out = topobind_cli("plan", "-t", BETZY, "-l", "per-l3", "-f", "openmpi", cwd=tmp_path)
    assert out.stderr.startswith(
        "topobind: note: --bind-to core binds each rank to every PU of its cores, so "
        "OMP_PLACES=cores gives each thread a whole core (all its PUs), not only the planned PU"
    )
