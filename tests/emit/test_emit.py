"""Emitters: OMP_PLACES means exactly the plan; srun masks decode (with hwloc-calc) to it;
the plan JSON follows its schema; every layout on every shared topology."""

from __future__ import annotations

import subprocess

import pytest
from plans import plan_of
from topo_sources import BETZY, layout_cases, layout_params, plan_or_skip

from topobind.emit import launch_dict
from topobind.emit.omp import PROC_BIND_VALUES, format_places, omp_env, parse_places
from topobind.emit.srun import decode_mask, srun_argv
from topobind.plan.model import validate_plan_json
from topobind.topo.topology import load, parse_list

CASES, IDS = layout_cases(8)
_plan = plan_or_skip


@pytest.mark.parametrize("name,src,layout,smt", layout_params(8))
def test_plan_invariants_and_places(name: str, src: str, layout: str, smt: bool) -> None:
    plan = _plan(src, layout, smt)
    used = [pu for r in plan.ranks for place in r.places for pu in place]
    assert len(used) == len(set(used)), "a PU is given to two threads"
    assert set(used) <= set(plan.topology.pus), "a PU outside the usable cpuset"
    assert all(r.threads == plan.threads for r in plan.ranks)
    for r in plan.ranks:  # the per-rank explicit OMP_PLACES text means exactly the plan
        assert parse_places(format_places(list(r.places))) == list(r.places)
    env = omp_env(plan)
    assert env["OMP_PROC_BIND"] in PROC_BIND_VALUES
    if plan.nranks == 1:
        assert parse_places(env["OMP_PLACES"]) == list(plan.ranks[0].places)
    doc = plan.to_dict(launch_dict(plan))
    validate_plan_json(doc)


@pytest.mark.slow
@pytest.mark.parametrize("name,src,layout,smt", CASES[::3], ids=IDS[::3])
def test_srun_masks_decode_with_hwloc_calc(
    name: str, src: str, layout: str, smt: bool, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    plan = _plan(src, layout, smt)
    xml = tmp_path / "topo.xml"
    xml.write_text(plan.topology.xml)
    launch = srun_argv(plan)
    bind = [a for a in launch.argv if a.startswith("--cpu-bind=mask_cpu:")]
    assert len(bind) == 1
    masks = bind[0].removeprefix("--cpu-bind=mask_cpu:").split(",")
    assert len(masks) == plan.nranks
    for rank, mask in zip(plan.ranks, masks, strict=True):
        out = subprocess.run(
            ["hwloc-calc", "--input", str(xml), "-I", "pu", "--po", mask],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert parse_list(out) == sorted(rank.cpus)
        assert decode_mask(mask) == sorted(rank.cpus)


def test_betzy_every_other_core_places_are_compact_notation() -> None:
    plan = plan_of(load(BETZY), "every-other-core", ranks=1, threads=64)
    assert omp_env(plan)["OMP_PLACES"] == "{0}:64:2"
    plan = plan_of(load(BETZY), "compact", ranks=1, threads=8, smt=True)
    assert omp_env(plan)["OMP_PLACES"] == "{0},{128},{1},{129},{2},{130},{3},{131}"


def test_places_explicit_list_when_irregular() -> None:
    assert format_places([(0,), (1,), (5,)]) == "{0},{1},{5}"
    assert format_places([(0, 128), (1, 129), (2, 130)]) == "{0,128}:3"
    assert parse_places("{0:4}:2:8") == [(0, 1, 2, 3), (8, 9, 10, 11)]


def test_srun_notes_name_the_traps() -> None:
    notes = " ".join(srun_argv(plan_of(load(BETZY), "per-l3")).notes)
    assert "only to CPUs the step holds" in notes and "--exclusive" in notes and "--hint" in notes


def test_whole_core_note_is_exact_for_ppr_and_rankfile_forms() -> None:
    """--bind-to core on SMT cores: OMP_PLACES=cores gives a thread the whole core. The note
    says so wherever --bind-to core is emitted (ppr and rankfile forms, 4.x and 5.x), and
    not for topobind run's launch, whose ranks export exact places (the per-rank step)."""
    from topobind.emit.openmpi import WHOLE_CORE_NOTE, openmpi_argv

    topo = load(BETZY)
    for layout in ("per-l3", "every-other-core"):  # ppr:1:l3cache, a rankfile
        plan = plan_of(topo, layout)
        for version in (4, 5):
            m = openmpi_argv(plan, version)
            assert WHOLE_CORE_NOTE in m.notes
            assert "whole core (all its PUs), not only the planned PU" in WHOLE_CORE_NOTE
            assert WHOLE_CORE_NOTE not in openmpi_argv(plan, version, exact_places=True).notes
        assert (m.rankfile is None) == (layout == "per-l3")
    smt_plan = plan_of(topo, "per-l3", smt=True)  # --bind-to hwthread: PUs, no note
    assert WHOLE_CORE_NOTE not in openmpi_argv(smt_plan, 5).notes
    assert not any("keeps threads" in n for n in launch_dict(plan_of(topo, "per-l3"))["notes"])


def test_rankfile_names_every_node() -> None:
    from topobind.emit.openmpi import openmpi_argv, rankfile_text

    plan = plan_of(load(BETZY), "every-other-core", ranks=2)
    m = openmpi_argv(plan, 4, rankfile_path="rf", hosts=["n1", "n2"])
    assert m.argv[:3] == ["mpirun", "-np", "4"] and m.rankfile is not None
    lines = [ln for ln in m.rankfile.splitlines() if ln.startswith("rank ")]
    one = [ln.split("=", 1)[1].split(" ", 1)[1] for ln in rankfile_text(plan, 4).splitlines()[1:]]
    assert [ln.split("=")[0] for ln in lines] == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert [ln.split("=")[1].split()[0] for ln in lines] == ["n1", "n1", "n2", "n2"]
    assert [ln.split(" ", 2)[2] for ln in lines] == one + one  # the same slots on each node
