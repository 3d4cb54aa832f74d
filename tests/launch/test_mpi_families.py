"""MPICH (Hydra) and Intel MPI launchers, proven by their own runtimes on this machine.

- ``topobind run --launcher mpich|intelmpi --verify --verify-running`` places a hybrid
  MPI+OpenMP program built with that MPI's mpicc: the MPI probe first, then the program's
  own threads sampled, and the program's report of its CPUs.
- MPICH: Hydra's own binding report (``HYDRA_TOPO_DEBUG=1``: ``process K binding: 0101``,
  one character per OS PU) is the oracle of the emitted ``-bind-to user:...``, on this
  machine and, through ``HWLOC_XMLFILE`` with ``HWLOC_THISSYSTEM=0`` (computed, not
  applied), on the big nodes of topologies/.
- Intel MPI: the pinning table ``I_MPI_DEBUG=4`` prints (``Rank Pid Node name Pin cpu``) is
  the oracle of the emitted ``I_MPI_PIN_PROCESSOR_LIST`` / ``I_MPI_PIN_DOMAIN``.

Needs ``make setup-mpis`` (.venv-mpich/, .venv-impi/); skipped without them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND as CLI_TOPOBIND
from paths import REPO, TOPOLOGIES
from plans import plan_of

from topobind.launch.mpi_launchers import REGISTRY
from topobind.launch.mpi_launchers.intelmpi import pin_env
from topobind.launch.mpi_launchers.mpich import Mpich
from topobind.topo.topology import load

TOPOBIND = [CLI_TOPOBIND]
MPICC = {"mpich": REPO / ".venv-mpich/bin/mpicc", "intelmpi": REPO / ".venv-impi/bin/mpicc"}

HYBRID_C = r"""
#define _GNU_SOURCE
#include <mpi.h>
#ifdef _OPENMP
#include <omp.h>
#else
#define omp_get_thread_num() 0
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* hybrid: every thread spins MS ms (argv[1]) so the per-rank step's sample sees it, then
   reports the CPU it ran on; the ranks' sum proves one MPI_COMM_WORLD */
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, one = 1, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double ms = argc > 1 ? atof(argv[1]) : 0;
  #pragma omp parallel
  {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6 < ms);
    #pragma omp critical
    printf("rank=%d thread=%d cpu=%d\n", rank, omp_get_thread_num(), sched_getcpu());
  }
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("size=%d sum=%d\n", size, sum);
  MPI_Finalize();
  return 0;
}
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "I_MPI_"))}


def run(args: list[str], env: dict[str, str] | None = None, timeout: float = 240):
    """Run in its own session; on a timeout the whole group is killed (an MPI proxy left
    spinning would hold a CPU of this 2-core machine)."""
    p = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**_env(), **(env or {})},
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return subprocess.CompletedProcess(args, p.returncode, out, err)


@pytest.fixture(scope="module", params=sorted(MPICC))
def hybrid(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(launcher name, the hybrid program built with that MPI's mpicc)."""
    name = request.param
    if REGISTRY[name].detect() is None or not MPICC[name].exists():
        pytest.skip(f"{name} not installed (make setup-mpis)")
    d = tmp_path_factory.mktemp(f"hybrid-{name}")
    (d / "hybrid.c").write_text(HYBRID_C)
    env = {"I_MPI_ROOT": str(MPICC[name].parents[1]), "I_MPI_CC": "cc"}
    for flags, exe in ((["-fopenmp"], "hybrid"), ([], "plain")):  # plain: OpenMP pragmas off
        cmd = [str(MPICC[name]), *flags, "-O1", str(d / "hybrid.c"), "-o", str(d / exe)]
        out = run(cmd, env=env)
        assert out.returncode == 0, out.stderr
    return name, d / "hybrid"


def planned(args: list[str]) -> list[list[int]]:
    out = run([*TOPOBIND, "plan", *args, "-f", "json"])
    assert out.returncode == 0, out.stderr
    return [r["cpus"] for r in json.loads(out.stdout)["ranks"]]


SHAPES = [["-l", "compact", "-r", "2", "-T", "1"], ["-l", "compact", "-r", "1", "-T", "2"]]


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=["2x1", "1x2"])
def test_run_verify_places_a_hybrid_program(hybrid, shape: list[str], tmp_path: Path) -> None:
    name, prog = hybrid
    out = run(
        [*TOPOBIND, "run", *shape, "--launcher", name, "--verify", "--verify-running",
         "--sample-ms", "300", "--", str(prog), "1200"],
        env={"TOPOBIND_WORKDIR": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    nthreads = int(shape[5]) * int(shape[3])
    assert f"verify: all {nthreads} threads on their planned CPUs" in out.stderr
    assert f"the program's {nthreads} threads ran on their planned CPUs" in out.stderr
    cpus = planned(shape)
    seen = re.findall(r"rank=(\d+) thread=(\d+) cpu=(\d+)", out.stdout)
    assert len(seen) == nthreads, out.stdout
    for rank, _thread, cpu in seen:
        assert int(cpu) in cpus[int(rank)], out.stdout
    n = len(cpus)
    assert f"size={n} sum={n}" in out.stdout  # one MPI world, not singletons


def hydra_bindings(text: str) -> dict[int, list[int]]:
    """Hydra's ``process K binding: 0110`` lines: K -> OS PUs (one character per PU)."""
    return {
        int(k): [i for i, c in enumerate(bits) if c == "1"]
        for k, bits in re.findall(r"process (\d+) binding: ([01]+)", text)
    }


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=["2x1", "1x2"])
def test_hydra_reports_the_planned_binding_here(shape: list[str]) -> None:
    """The emitted command run with HYDRA_TOPO_DEBUG=1 on this machine."""
    mpich = REGISTRY["mpich"].detect()
    if mpich is None:
        pytest.skip("MPICH not installed (make setup-mpis)")
    out = run([*TOPOBIND, "plan", *shape, "-f", "mpich"])
    argv = out.stdout.split()
    assert argv[0] == "mpiexec" and "-bind-to" in argv
    done = run([mpich.path, *argv[1:], "true"], env={"HYDRA_TOPO_DEBUG": "1"})
    assert done.returncode == 0, done.stderr
    got = hydra_bindings(done.stdout + done.stderr)
    assert [got[k] for k in sorted(got)] == planned(shape)


BIG = ["192em64t-24n8c2t.xml", "64intel64-fakeKNL-SNC4-hybrid.xml", "16em64t-4s2c2t.xml"]
LAYOUTS = [("compact", None), ("spread", 4), ("every-other-core", None), ("per-l3", None),
           ("per-numa", None)]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("xml", BIG)
def test_hydra_computes_the_planned_binding_on_big_nodes(xml: str) -> None:
    """Hydra loads the big node's XML (HWLOC_XMLFILE; HWLOC_THISSYSTEM=0, so hwloc does not
    apply the binding to this 2-PU machine) and prints the binding it computed from the
    emitted ``-bind-to user:...`` for every process."""
    mpich = REGISTRY["mpich"].detect()
    path = TOPOLOGIES / xml
    if mpich is None or not path.exists():
        pytest.skip("MPICH (make setup-mpis) or the shared topology is missing")
    topo = load(str(path))
    checked = 0
    for layout, ranks in LAYOUTS:
        try:
            plan = plan_of(topo, layout, ranks=ranks)
        except Exception:  # a layout this node cannot take (no L3 level, ...)
            continue
        argv = Mpich().emit(plan, "rf", None).argv
        env = {"HWLOC_XMLFILE": str(path), "HWLOC_THISSYSTEM": "0", "HYDRA_TOPO_DEBUG": "1"}
        done = run([mpich.path, *argv[1:], "true"], env=env, timeout=120)
        got = hydra_bindings(done.stdout + done.stderr)
        assert [got.get(k) for k in range(plan.nranks)] == [list(r.cpus) for r in plan.ranks], (
            f"{xml} {layout}: {done.stderr[-400:]}"
        )
        checked += 1
    assert checked >= 3


def pin_table(text: str) -> dict[int, list[int]]:
    """Intel MPI's ``I_MPI_DEBUG=4`` pinning table: rank -> OS CPUs (``{0,2-3}``)."""
    out: dict[int, list[int]] = {}
    for rank, cpus in re.findall(r"MPI startup\(\):\s+(\d+)\s+\d+\s+\S+\s+\{([\d,-]+)\}", text):
        ids: list[int] = []
        for part in cpus.split(","):
            a, _, b = part.partition("-")
            ids += range(int(a), int(b or a) + 1)
        out[int(rank)] = ids
    return out


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=["2x1", "1x2"])
def test_intel_mpi_pins_as_planned(hybrid, shape: list[str], tmp_path: Path) -> None:
    """``topobind run --launcher intelmpi``'s variables, read back from the pinning table
    Intel MPI prints at start-up. The table shows the mask of the thread calling MPI_Init:
    in an OpenMP program whose runtime has bound its first thread to its first place
    (OMP_PROC_BIND with OMP_PLACES) that is the place, so the table is read from the same
    program built without OpenMP."""
    name, prog = hybrid
    if name != "intelmpi":
        pytest.skip("Intel MPI's table")
    out = run(
        [*TOPOBIND, "run", *shape, "--launcher", "intelmpi", "--", str(prog.parent / "plain")],
        env={"I_MPI_DEBUG": "4", "TOPOBIND_WORKDIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    table = pin_table(out.stdout + out.stderr)
    assert [table[k] for k in sorted(table)] == planned(shape), out.stdout


@pytest.mark.parametrize("xml", BIG)
def test_intel_mpi_variables_for_big_nodes_decode_to_the_plan(xml: str) -> None:
    """What Intel MPI is told for every layout on a big node: the processor list (one PU per
    rank) or one domain mask per rank, in rank order (I_MPI_PIN_ORDER=range)."""
    path = TOPOLOGIES / xml
    if not path.exists():
        pytest.skip("shared topology missing")
    topo = load(str(path))
    for layout, ranks in [*LAYOUTS, ("compact", 2)]:
        try:
            plan = plan_of(topo, layout, ranks=ranks)
        except Exception:
            continue
        env = pin_env(plan)
        if "I_MPI_PIN_PROCESSOR_LIST" in env:
            got = [[int(x)] for x in env["I_MPI_PIN_PROCESSOR_LIST"].split(",")]
        else:
            assert env["I_MPI_PIN_ORDER"] == "range"
            masks = env["I_MPI_PIN_DOMAIN"].strip("[]").split(",")
            got = [[i for i in range(int(m, 16).bit_length()) if int(m, 16) >> i & 1]
                   for m in masks]  # fmt: skip
        assert got == [sorted(r.cpus) for r in plan.ranks], (xml, layout)


@pytest.mark.slow
def test_under_a_restricted_mask_the_rank_lands_on_the_allowed_cpu(hybrid, tmp_path: Path) -> None:
    """Under ``taskset -c 1`` the plan holds CPU 1 only: MPICH binds it with -bind-to user:1;
    Intel MPI's own pinning is off (a pin outside the mask made its proxy spin) and the
    per-rank step binds the rank (version-2 step file)."""
    name, prog = hybrid
    out = run(
        ["taskset", "-c", "1", *TOPOBIND, "run", "-l", "compact", "-r", "1", "--launcher", name,
         "--verify", "--", str(prog), "100"],
        env={"TOPOBIND_WORKDIR": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "verify: all 1 threads on their planned CPUs" in out.stderr
    assert "rank=0 thread=0 cpu=1" in out.stdout
    if name == "intelmpi":
        assert "Intel MPI's pinning is off" in out.stderr
