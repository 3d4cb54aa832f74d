"""The Flux adapter (topo/flux_allocation.py): R read, checked and bounded; host lists; the
record it makes; and the allocation boundary's manager choice (topo/manager.py). In-process:
no Flux needed (tests/launch/test_flux.py runs the real one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from topobind.errors import TopobindError
from topobind.topo import flux_allocation as flux
from topobind.topo.allocation import NONE, Allocation, machine_cpus
from topobind.topo.manager import detect


def r_text(lite: list[dict[str, object]], nodelist: list[str]) -> str:
    return json.dumps({"version": 1, "execution": {"R_lite": lite, "nodelist": nodelist}})


def test_r_gives_each_broker_rank_its_host_cores_and_gpus() -> None:
    text = r_text(
        [{"rank": "0-1", "children": {"core": "0-3", "gpu": "0-1"}},
         {"rank": "2", "children": {"core": "0-1"}}],
        ["node[01-02]", "big3"],
    )  # fmt: skip
    ranks = flux.parse_r(text)
    assert [h for h, _, _ in ranks] == ["node01", "node02", "big3"]
    assert ranks[0][1] == {0, 1, 2, 3} and ranks[0][2] == {0, 1}
    assert ranks[2][1] == {0, 1} and not ranks[2][2]
    shares = flux.shares_of(ranks)
    assert [s.hosts for s in shares] == [("node01", "node02"), ("big3",)]
    assert shares[0].threads_per_core == 1 and shares[0].tasks == 0  # Flux names no tasks


def test_flux_core_ids_are_whole_cores() -> None:
    """A Flux core id is hwloc's logical core index: on SMT hardware, both its PUs."""
    cores = [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert machine_cpus(cores, frozenset({1, 2}), 1, "n1", "Flux") == {1, 5, 2, 6}
    with pytest.raises(TopobindError, match="Flux gives the job CPU 9 on n1"):
        machine_cpus(cores, frozenset({9}), 1, "n1", "Flux")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "not JSON"),
        ("[" * 100000, "not JSON"),
        ('{"version": 2}', "not R version 1"),
        (r_text([], ["n1"]), "'R_lite' is not a list"),
        (r_text([{"rank": "0"}], ["n1"]), "lacks 'rank' or 'children'"),
        (r_text([{"rank": "0-1", "children": {"core": "0"}}], ["n1"]), "2 broker ranks but 1"),
        (r_text([{"rank": "0", "children": {"core": "0-99999999"}}], ["n1"]), "core ids"),
        (r_text([{"rank": "0", "children": {"core": "x"}}], ["n1"]), "core ids"),
        (r_text([{"rank": "0", "children": {"core": "0"}}], ["n;rm -rf"]), "not a host name"),
        (r_text([{"rank": "0", "children": {"core": "0"}}], ["n[0-99999999]"]), "more than"),
        (r_text([{"rank": "0", "children": {"core": "0"}}], ["n[5-1]"]), "more than"),
        (r_text([{"rank": "0", "children": {"core": "0"}}], [7]), "'nodelist' is not"),  # type: ignore[list-item]
    ],
)  # fmt: skip
def test_bad_r_is_one_line_naming_it(text: str, says: str) -> None:
    with pytest.raises(TopobindError, match="Flux resource set") as info:
        flux.parse_r(text, "'flux kvs get resource.R'")
    assert says in str(info.value) and "\n" not in str(info.value)


def test_several_brokers_on_one_host_are_refused_in_one_line() -> None:
    """flux start --test-size=3 on one machine: every broker holds that machine's cores."""
    ranks = flux.parse_r(r_text([{"rank": "0-2", "children": {"core": "0-1"}}], ["vm,vm,vm"]))
    with pytest.raises(TopobindError, match=r"several brokers on one host: vm \(3 brokers\)"):
        flux.shares_of(ranks)


def test_host_lists_keep_padding_and_split_outside_brackets() -> None:
    assert flux.expand_hostlist("a[08-10],b,c[1,3]") == ["a08", "a09", "a10", "b", "c1", "c3"]
    assert flux.expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]


def test_the_manager_is_chosen_from_the_environment_only() -> None:
    """Outside any manager: NONE (no tool runs); Slurm: its adapter's record, lazily."""
    assert detect({}) is NONE and not NONE.inside
    slurm = detect({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS": "4"})
    assert (slurm.manager, slurm.nodes) == ("slurm", 2)
    assert slurm.tasks_per_node() == (2, "SLURM_NTASKS=4 over SLURM_JOB_NUM_NODES=2")


def test_flux_without_its_command_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TopobindError, match=r"cannot read the Flux job's resources") as info:
        detect({"FLUX_URI": "local:///nowhere"})
    assert "\n" not in str(info.value)
    # a FLUX_URI left over outside Flux: the line names it and the fix
    assert "FLUX_URI='local:///nowhere'" in str(info.value)
    assert str(info.value).endswith("or, outside Flux, unset FLUX_URI")


@pytest.mark.slow  # starts a stand-in flux
def test_a_flux_that_fails_names_flux_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "flux"
    fake.write_text("#!/bin/sh\necho 'flux-kvs: flux_open: Connection refused' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TopobindError) as info:
        detect({"FLUX_URI": "local:///gone"})
    line = str(info.value)
    assert "Connection refused" in line and "FLUX_URI='local:///gone'" in line
    assert "unset FLUX_URI" in line and "\n" not in line


def test_a_built_record_needs_no_environment() -> None:
    """Planning and launch take the record: a test builds one directly."""
    alloc = Allocation("flux", 3, hosts=lambda: ["a", "b", "c"])
    assert alloc.inside and alloc.hostnames() == ["a", "b", "c"] and alloc.shares() is None


def test_host_lists_keep_plain_odd_names_and_the_exact_limit() -> None:
    assert flux.expand_hostlist("ALL,node1") == ["ALL", "node1"]
    assert len(flux.expand_hostlist("n[0-255]x[0-255]")) == flux.MAX_NODES
    with pytest.raises(TopobindError, match="more than 65536 hosts"):
        flux.expand_hostlist("n[0-255]x[0-256]")


@pytest.mark.slow  # a Python process of its own, its memory bounded
def test_nested_brackets_are_refused_before_their_names_are_made() -> None:
    """``n[0-65534][0-65534]`` names 4e9 hosts: each bracket is under the limit, their product
    must be refused before it is built (it took all memory before)."""
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))\n"
        "from topobind.topo.flux_allocation import expand_hostlist\n"
        "from topobind.errors import TopobindError\n"
        "try:\n    expand_hostlist('n[0-65534][0-65534]')\n"
        "except TopobindError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-300:]
    assert "names more than 65536 hosts" in done.stdout


@pytest.mark.parametrize("job", ["-h", "--help", "ƒ1;rm", "1" * 65, "\udcff"])
def test_a_job_id_that_is_no_job_id_is_refused_before_flux_runs(
    job: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # flux is never asked: the id is refused first
    with pytest.raises(TopobindError, match=r"^FLUX_JOB_ID=.* is not a Flux job id; unset it$"):
        flux.allocation({"FLUX_URI": "local:///nowhere", "FLUX_JOB_ID": job})


@pytest.mark.parametrize("job", ["ƒ2fSmHqS7", "123456", "0x1f", "0000.0001.0000.0000"])
def test_every_form_of_a_job_id_goes_to_flux(job: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TopobindError, match=rf"flux job info {job} R"):
        flux.allocation({"FLUX_URI": "local:///nowhere", "FLUX_JOB_ID": job})
