"""Real placement on a multi-NUMA and a multi-socket kernel: the QEMU guest of scripts/numa-vm.

This machine has one NUMA node and one package, so elsewhere multi-socket placement is proven
only through the mappers' simulations. Here each shape boots once per session (both at once),
runs one batch (tests/numa_vm_guest.py) whose results reach the host through a --rwdir
directory, and each test reads its case: `topobind show` sees the shape live, the layouts'
real launches with OpenMPI 4, OpenMPI 5, MPICH (one case) and no launcher pass `topobind run
--verify-running` with every thread on the CPU the plan gives it on the equivalent synthetic
topology, and a program moved to other CPUs with taskset fails it. The guest's speed means
nothing (no KVM).
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from paths import REPO
from plans import plan_of

from topobind.plan.model import Plan
from topobind.topo.topology import format_list, load, parse_list

NUMA_VM = REPO / "scripts" / "numa-vm"
GUEST_BATCH = REPO / "tests" / "numa_vm_guest.py"
SLEEPER_SRC = REPO / "tests" / "data" / "numa_vm" / "omp_sleep.c"
CANARY_SRC = REPO / "tests" / "data" / "numa_vm" / "avx2_canary.c"
BOOT_TIMEOUT = 1500  # s: both guests, boot and batch, on 2 busy cores
LAST = REPO / "build" / "numa-vm-tests" / "last"  # the last session's results, by shape
# Sampled well after start-up (a rank's start takes seconds in a guest on a busy machine: a
# sample at 4 s once caught a thread before libgomp bound it, and buffers half touched),
# and the program still running then.
SAMPLE_MS, SLEEP_MS = "10000", "25000"
MEM_MIB = "16"  # touched by each rank of the memory cases (MIB per rank, over its threads)

pytestmark = [
    pytest.mark.vm,
    pytest.mark.slow,
    pytest.mark.skipif(
        platform.machine() != "x86_64" or sys.platform != "linux",
        reason="the guest is an x86_64 QEMU system booting this machine's Linux userland",
    ),
]


@dataclass(frozen=True)
class Launch:
    """One real launch in the guest: layout, launcher, memory policy, and a wrapper (taskset
    or numactl) for the cases that must fail."""

    layout: str
    how: str  # openmpi4 | openmpi5 | mpich | none
    taskset: str = ""  # CPUs the program is moved to
    mem: str = ""  # --mem policy; the program then touches MEM_MIB per rank
    membind: str = ""  # NUMA node the program's memory is moved to (numactl --membind)
    args: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return "-".join(
            [self.layout, self.how, *self.args]
            + ([f"taskset{self.taskset}"] if self.taskset else [])
            + ([f"mem={self.mem}"] if self.mem else [])
            + ([f"numactl-membind={self.membind}"] if self.membind else [])
        )

    @property
    def fails(self) -> bool:
        return bool(self.taskset or self.membind)

    def argv(self, sleeper: str) -> list[str]:
        how = ["--launcher", self.how] if self.how in ("none", "mpich") else ["--mpi", self.how]
        mem = ["--mem", self.mem] if self.mem else []
        wrap = ["taskset", "-c", self.taskset] if self.taskset else []
        wrap += ["numactl", f"--membind={self.membind}"] if self.membind else []
        prog = [sleeper, SLEEP_MS] + ([MEM_MIB] if self.mem else [])
        return ["topobind", "run", "-l", self.layout, *self.args, *how, *mem, "--verify-running",
                "--sample-ms", SAMPLE_MS, "--", *wrap, *prog]  # fmt: skip

    def plan(self, topology: str) -> Plan:
        kw = {"ranks": int(self.args[1]), "threads": int(self.args[3])} if self.args else {}
        return plan_of(load(topology), self.layout, **kw)


# Each shape, the synthetic topology its live one must plan like, and its launches: every
# layout with OpenMPI 4 and 5 on one shape or the other (the key ones on both), no launcher
# for the one-rank plans, and a wrong binding per launcher kind.
SHAPES = {
    "numa4": (
        "synthetic:pack:1 numa:4 l3:1 core:2 pu:1",
        (
            Launch("per-numa", "openmpi4"),
            Launch("per-numa", "openmpi5"),
            Launch("per-numa", "mpich"),  # Hydra's -bind-to user list (.venv-mpich)
            Launch("per-l3", "openmpi4"),
            Launch("every-other-core", "openmpi4"),
            Launch("per-socket", "openmpi5"),
            Launch("spread", "openmpi5"),
            Launch("compact", "openmpi5"),
            Launch("per-socket", "none"),
            Launch("compact", "none"),
            Launch("per-numa", "openmpi4", taskset="6-7"),
            # memory: every policy, each rank on its own node (per-numa) or over all four
            Launch("per-numa", "openmpi4", mem="bind"),
            Launch("per-numa", "openmpi5", mem="bind"),
            Launch("per-numa", "openmpi5", mem="interleave"),
            Launch("per-numa", "openmpi4", mem="preferred"),
            Launch("per-socket", "none", mem="local"),
            Launch("per-socket", "none", mem="interleave"),
            Launch("per-numa", "openmpi4", mem="bind", membind="3"),
            Launch("compact", "none", mem="bind", membind="3", args=("-r", "1", "-T", "2")),
        ),
    ),
    "sockets2": (
        "synthetic:pack:2 numa:1 l3:1 core:2 pu:2",
        (
            Launch("per-socket", "openmpi4"),
            Launch("per-socket", "openmpi5"),
            Launch("per-numa", "openmpi5"),
            Launch("per-l3", "openmpi5"),
            Launch("every-other-core", "openmpi5"),
            Launch("spread", "openmpi4"),
            Launch("compact", "openmpi4"),
            Launch("spread", "none"),
            Launch("per-socket", "openmpi5", taskset="4-7"),
            Launch("compact", "none", taskset="4-7"),
            Launch("per-socket", "openmpi4", mem="local"),
            Launch("per-socket", "openmpi5", mem="none"),
            Launch("per-socket", "openmpi4", mem="interleave"),
            Launch("per-socket", "openmpi5", mem="preferred"),
            Launch("compact", "none", mem="bind"),
            Launch("per-socket", "openmpi5", mem="bind", membind="0"),
        ),
    ),
}
SHOW = {
    "numa4": "1 package, 4 NUMA nodes, 4 L3 domains, 8 cores, 8 PUs (SMT 1)",
    "sockets2": "2 packages, 2 NUMA nodes, 2 L3 domains, 4 cores, 8 PUs (SMT 2)",
}


# Issue 45 item 5, real injected causes on numa4, each case alone in the guest (the numastat
# deltas and the CPU hog are node-wide): STREAM (2 threads, 3 x 8 MB arrays) on node 0's CPUs
# with its memory local (3 runs) or on node 3 (memory off-node), and the latency kernel's
# per-NUMA read-bandwidth matrix with and without a CPU hog on node 2's CPUs (where).
EVIDENCE_MEMBIND = {"evidence-local-1": 0, "evidence-local-2": 0, "evidence-local-3": 0,
                    "evidence-remote": 3}  # fmt: skip
HOG_CPUS = (4, 5)  # node 2's vCPUs on numa4
HOG = "while :; do :; done"
PASSIVE = {"OMP_WAIT_POLICY": "passive"}  # no spinning team beside the hog on emulated CPUs


def _evidence_cases(where: Path) -> list[dict[str, object]]:
    """The kernels' cases (built for the baseline into WHERE); their documents are on stdout."""
    stream = [str(where / "stream"), "--elements", "1M", "--trials", "3"]
    cases: list[dict[str, object]] = [
        {"name": name, "alone": True, "env": {"OMP_NUM_THREADS": "2"},
         "argv": ["numactl", "--cpunodebind=0", f"--membind={node}", *stream]}
        for name, node in EVIDENCE_MEMBIND.items()
    ]  # fmt: skip
    matrix = f"{where / 'latency'} --sizes 64K --trials 1 --min-time 0.01 --bw-matrix --bw-size 2M"
    hogs = "".join(f"taskset -c {c} sh -c '{HOG}' & h{c}=$!; " for c in HOG_CPUS)
    kill = "kill " + " ".join(f"$h{c}" for c in HOG_CPUS)
    cases += [
        {"name": "where-quiet", "alone": True, "env": PASSIVE, "argv": ["sh", "-c", matrix]},
        {"name": "where-hog", "alone": True, "env": PASSIVE,
         "argv": ["sh", "-c", f"{hogs}sleep 1; {matrix}; s=$?; {kill}; exit $s"]},
    ]  # fmt: skip
    return cases


def _spec(shape: str, where: Path, sleeper: str) -> dict[str, object]:
    cases: list[dict[str, object]] = [
        {"name": "show", "argv": ["topobind", "show"]},
        {"name": "lstopo", "argv": ["lstopo-no-graphics", "--no-io"]},
        {"name": "avx2-canary", "argv": [str(where / "avx2_canary")]},
    ]
    if shape == "numa4":  # first: alone, in a quiet guest
        cases = _evidence_cases(where) + cases
    cases += [{"name": c.name, "argv": c.argv(sleeper)} for c in SHAPES[shape][1]]
    return {"out": str(where / f"{shape}.json"), "jobs": 6, "cases": cases}


@pytest.fixture(scope="session")
def guests() -> dict[str, dict[str, dict[str, object]]]:
    """Both guests booted at once, each running its whole batch; their results by shape."""
    if not NUMA_VM.exists():
        pytest.fail("scripts/numa-vm is missing")
    where = REPO / "build" / "numa-vm-tests" / uuid.uuid4().hex[:12]
    where.mkdir(parents=True)
    try:
        sleeper = where / "omp_sleep"
        subprocess.run(["cc", "-O1", "-std=c11", "-fopenmp", str(SLEEPER_SRC), "-o", str(sleeper)],
                       check=True, timeout=120)  # fmt: skip
        subprocess.run(["cc", "-O1", "-mavx2", str(CANARY_SRC), "-o", str(where / "avx2_canary")],
                       check=True, timeout=120)  # fmt: skip
        # the kernels for the guest's CPU (x86-64-v2 at most: scripts/numa-vm), not -march=native
        subprocess.run(["make", "-s", "-C", str(REPO / "kernels"), f"BIN={where}", "CFLAGS=-O2",
                        str(where / "stream"), str(where / "latency")],
                       check=True, timeout=600)  # fmt: skip
        procs = {}
        start = time.monotonic()
        for shape in SHAPES:
            spec = where / f"{shape}-spec.json"
            spec.write_text(json.dumps(_spec(shape, where, str(sleeper))))
            procs[shape] = subprocess.Popen(
                [str(NUMA_VM), "run", "--shape", shape, "--timeout", str(BOOT_TIMEOUT),
                 "--rwdir", str(where), "--", "python", str(GUEST_BATCH), str(spec)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
        results = {}
        for shape, proc in procs.items():
            out, _ = proc.communicate()
            got = where / f"{shape}.json"
            if proc.returncode != 0 or not got.exists():
                pytest.fail(f"{shape} guest: exit {proc.returncode}; last output:\n{out[-3000:]}")
            results[shape] = json.loads(got.read_text())
            LAST.mkdir(parents=True, exist_ok=True)  # kept for a look after a failure
            shutil.copy(got, LAST / f"{shape}.json")
        print(f"\nnuma-vm tier: both guests in {time.monotonic() - start:.0f} s", file=sys.stderr)
        return results
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _case(guests: dict[str, dict[str, dict[str, object]]], shape: str, name: str) -> dict:  # type: ignore[type-arg]
    case = guests[shape][name]
    assert case["status"] != 124, f"{shape} {name}: stopped at its timeout"
    return case


ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+(\S+)\s+(\d+)\s+(\S+)\s+(OK|MISMATCH.*|MISSING.*)$")


def _rows(stderr: str) -> list[tuple[int, int, str, str]]:
    """(rank, thread, planned, status) of the verify table."""
    return [
        (int(m[1]), int(m[2]), m[3], m[6].split()[0])
        for line in stderr.splitlines()
        if (m := ROW.match(line))
    ]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_show_sees_the_shape_live(guests: dict, shape: str) -> None:  # type: ignore[type-arg]
    case = _case(guests, shape, "show")
    assert case["status"] == 0, case["stderr"]
    lines = str(case["stdout"]).splitlines()
    assert lines[0] == "topology: live (host virtme-ng)"
    assert lines[1].startswith(SHOW[shape] + "; usable PUs (OS): 0-7")
    lstopo = str(_case(guests, shape, "lstopo")["stdout"])
    assert lstopo.count("NUMANode") == (4 if shape == "numa4" else 2)
    assert lstopo.count("Package") == (1 if shape == "numa4" else 2)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_avx2_code_dies_in_the_guest_on_any_host(guests: dict, shape: str) -> None:  # type: ignore[type-arg]
    """The guest's CPU has no AVX (scripts/numa-vm): a binary built with -march=native on the
    host that runs the tier fails here as it would on an AVX-512 host (where TCG's 'max' CPU
    lacked AVX-512), so every binary the guest runs must be built for the baseline (the
    per-rank step is, libtb/baseline.mk), whatever the host."""
    case = _case(guests, shape, "avx2-canary")
    assert case["status"] == -4, case  # SIGILL


CASES = [(shape, c) for shape, (_, launches) in sorted(SHAPES.items()) for c in launches]


def _ids(v: object) -> str:
    return str(getattr(v, "name", v))


@pytest.mark.parametrize("shape,launch", [p for p in CASES if not p[1].fails], ids=_ids)
def test_real_launch_runs_where_planned(guests: dict, shape: str, launch: Launch) -> None:  # type: ignore[type-arg]
    case = _case(guests, shape, launch.name)
    plan = launch.plan(SHAPES[shape][0])
    threads = sum(len(r.places) for r in plan.ranks)
    assert case["status"] == 0, case["stderr"]
    assert f"the program's {threads} threads ran on their planned CPUs" in str(case["stderr"])
    planned = sorted(
        (r.rank, t, format_list(place)) for r in plan.ranks for t, place in enumerate(r.places)
    )
    rows = _rows(str(case["stderr"]))
    assert sorted((r, t, p) for r, t, p, _ in rows) == planned
    assert {s for *_, s in rows} == {"OK"}


def _moved_cases() -> list[object]:
    """The cases whose program is moved; one known regression marked (see its reason)."""
    known = pytest.mark.xfail(
        reason="open: on a busy host (twice; it passed alone) a team that libgomp squeezes "
        "onto fewer places than threads (taskset 4-7: 4 places -> 2) gave 'nothing observed' "
        "(exit 1) instead of MISMATCH in the TCG guest, since the sampler waits for the "
        "OpenMP team (issue 31 item 9)",
        strict=False,
    )
    return [
        pytest.param(*p, marks=known) if p[0] == "sockets2" and p[1].how == "none" else p
        for p in CASES
        if p[1].taskset
    ]


@pytest.mark.parametrize("shape,launch", _moved_cases(), ids=_ids)
def test_program_moved_elsewhere_fails_verification(
    guests: dict,  # type: ignore[type-arg]
    shape: str,
    launch: Launch,
) -> None:
    case = _case(guests, shape, launch.name)
    assert case["status"] == 1, case["stderr"]
    err = str(case["stderr"])
    assert "topobind: error: the program ran with a placement that differs from the plan" in err
    rows = _rows(err)
    moved = set(parse_list(launch.taskset))
    bad = [r for r in rows if r[3] == "MISMATCH"]
    assert bad, err  # the planned CPUs outside taskset's set are the ones reported
    assert all(not set(parse_list(p)) & moved for _, _, p, _ in bad), err


NODES = re.compile(r"^numa_maps rank (\d+):((?: N\d+=\d+)*)$", re.M)


def _pages_by_rank(stdout: str) -> dict[int, dict[int, int]]:
    """The program's own numa_maps reading: rank -> NUMA node -> pages."""
    return {
        int(m[1]): {int(n): int(p) for n, p in re.findall(r"N(\d+)=(\d+)", m[2])}
        for m in NODES.finditer(stdout)
    }


MEM_CASES = [p for p in CASES if p[1].mem]


@pytest.mark.parametrize("shape,launch", [p for p in MEM_CASES if not p[1].fails], ids=_ids)
def test_each_ranks_pages_land_on_its_planned_nodes(
    guests: dict,  # type: ignore[type-arg]
    shape: str,
    launch: Launch,
) -> None:
    """The program reads its own numa_maps: every rank's pages lie on its NUMA nodes, spread
    over all of them when the policy interleaves; topobind's own check agrees."""
    case = _case(guests, shape, launch.name)
    assert case["status"] == 0, case["stderr"]
    plan = launch.plan(SHAPES[shape][0])
    seen = _pages_by_rank(str(case["stdout"]))
    assert sorted(seen) == [r.rank for r in plan.ranks], case["stdout"]
    for r in plan.ranks:
        pages = seen[r.rank]
        assert sum(pages.values()) >= int(MEM_MIB) * 256 * 0.9, pages  # the touched buffers
        if launch.mem != "none":  # (none: the kernel's default, not a plan to check)
            assert set(pages) <= set(r.numa), (r.rank, r.numa, pages)
        if launch.mem == "interleave" or (launch.mem == "local" and len(r.numa) > 1):
            assert set(pages) == set(r.numa), (r.rank, r.numa, pages)
    if launch.mem != "none":
        assert f"the memory of all {plan.nranks} ranks is on its planned NUMA nodes" in str(
            case["stderr"]
        )
        sampled = _sampled_mib(str(case["stderr"]))  # judged: at least 1 MiB seen per rank
        assert sorted(sampled) == [r.rank for r in plan.ranks], case["stderr"]
        assert all(mib >= 1.0 for mib in sampled.values()), sampled


MEM_ROW = re.compile(r"^\s+(\d+)  virtme-ng\s{4}.*?((?:\d+: [\d.]+ MiB(?:, )?)+)", re.M)


def _sampled_mib(stderr: str) -> dict[int, float]:
    """Rank -> MiB of anonymous memory on any node, from topobind's memory table."""
    return {
        int(m[1]): sum(float(x) for x in re.findall(r"\d+: ([\d.]+) MiB", m[2]))
        for m in MEM_ROW.finditer(stderr)
    }


@pytest.mark.parametrize("shape,launch", [p for p in MEM_CASES if p[1].fails], ids=_ids)
def test_memory_moved_elsewhere_fails_verification(
    guests: dict,  # type: ignore[type-arg]
    shape: str,
    launch: Launch,
) -> None:
    """Under numactl --membind=N the pages are on node N (the program's own reading), and
    --verify-running fails every rank planned elsewhere."""
    case = _case(guests, shape, launch.name)
    plan = launch.plan(SHAPES[shape][0])
    seen = _pages_by_rank(str(case["stdout"]))
    moved = int(launch.membind)
    assert all(set(p) == {moved} for p in seen.values()), seen
    elsewhere = [r for r in plan.ranks if moved not in r.numa]
    assert elsewhere
    assert case["status"] == 1, case["stderr"]
    assert f"the memory of {len(elsewhere)} of {plan.nranks} ranks differs from the plan" in str(
        case["stderr"]
    )


def _document(guests: dict, name: str) -> dict:  # type: ignore[type-arg]
    """The result document a kernel's case printed on numa4."""
    case = _case(guests, "numa4", name)
    assert case["status"] == 0, case["stderr"]
    return json.loads(str(case["stdout"]))


def test_memory_bound_off_node_shows_in_the_evidence(guests: dict) -> None:  # type: ignore[type-arg]
    """Issue 45 item 5, memory off-node: STREAM on node 0's CPUs under numactl --membind=3 has
    nearly all its resident pages on a remote node (the evidence's numa_maps reading), and
    the node-wide other_node count moves; with --membind=0, neither. (numa_miss stays 0 under
    a bind policy.) tests/data/numa_vm/evidence/ holds such documents, and its README.md says
    why, for the tests without a guest."""
    signals = {}
    for name in EVIDENCE_MEMBIND:
        ev = _document(guests, name)["evidence"]
        assert ev["cpus"] == [0, 1], ev  # numactl --cpunodebind=0: node 0's vCPUs
        signals[name] = ev["signals"]
    local = [s for name, s in signals.items() if EVIDENCE_MEMBIND[name] == 0]
    remote = signals["evidence-remote"]
    # local: the libraries' page-cache pages may lie anywhere (0.009 to 0.053 seen)
    assert all(s["remote_page_share"] < 0.2 for s in local), local
    assert remote["remote_page_share"] > 0.9, remote
    # allocations off the CPUs' node: 24 MB of arrays in 2 MiB THPs count 12 (103 seen)
    assert remote["numa_other_node"] > 10, remote
    assert all(s["numa_other_node"] < remote["numa_other_node"] / 10 for s in local), signals


def test_every_numa_nodes_bandwidth_row_is_measured_with_a_hog_on_one(guests: dict) -> None:  # type: ignore[type-arg]
    """Issue 45 item 5, where: the latency kernel's per-NUMA read-bandwidth matrix measures
    every node's row (each row pinned the main thread, so rows 1-3 were null on a real
    multi-NUMA kernel until each row restored the process's mask), quiet and with a CPU hog
    on node 2's vCPUs. The figures of an emulated CPU are not compared."""
    for name in ("where-quiet", "where-hog"):
        doc = _document(guests, name)
        bw = doc["matrices"]["read_bw"]
        assert bw["rows"] == [0, 1, 2, 3] and bw["cols"] == [0, 1, 2, 3], bw
        assert all(v is not None and v > 0 for row in bw["values"] for v in row), (name, bw)
        assert doc["evidence"]["cpus"] == list(range(8)), doc["evidence"]
