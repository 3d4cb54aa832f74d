"""MPICH (Hydra) and Intel MPI on several nodes of the local 3-node Slurm cluster, and Intel
MPI under srun.

- ``topobind run --launcher mpich|intelmpi --verify --verify-running`` in an sbatch job of 2
  or 3 nodes: Hydra starts its proxies through Slurm (its slurm bootstrap runs srun), each
  node's ranks are bound as planned. The oracles: the hybrid program's own report (host, rank,
  thread, CPU it ran on, and the size of MPI_COMM_WORLD) and the table of the running
  program's sampled threads (host, planned, actual, affinity), sampled 1.5 s after start:
  Intel MPI's MPI_Init over TCP between the nodes takes longer than on one node, and a
  sample at 0.4 s once saw a rank on another CPU than the one its MPI_Init ends on.
- A job whose nodes hold different shares (another job holds a CPU of node3): one Hydra
  launch over a host file, each rank bound by the per-rank step to its group's plan.
- An Intel MPI program under ``topobind run`` (srun, MpiDefault=none): ``--mpi=pmi2`` and
  ``I_MPI_PMI_LIBRARY`` = Slurm's libpmi2, proven by Intel MPI's own ``PMI API: pmi2`` line
  (``I_MPI_DEBUG=5``); a PMI-2 library given under ``--mpi=pmix`` is refused.

Needs ``make setup-mpis whereami-mpis`` and root (the cluster); skipped without them.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import venv_bin
from paths import REPO
from slurm_helpers import (
    SlurmCluster,
    sbatch_wait,
    slurm_cluster3,  # noqa: F401  (session fixture)
)
from test_mpi_families import HYBRID_C

from topobind.errors import TopobindError
from topobind.launch.mpi_launchers import REGISTRY
from topobind.launch.mpi_launchers.linked import is_intel_mpi, linked_mpi
from topobind.launch.mpi_launchers.slurm_mpi import intel_pmi, slurm_pmi2_library

MPICC = {"mpich": REPO / ".venv-mpich/bin/mpicc", "intelmpi": REPO / ".venv-impi/bin/mpicc"}
#: every thread also reports its host: the node each rank ran on, seen by the program
REPORT = 'printf("rank=%d thread=%d cpu=%d\\n", rank, omp_get_thread_num(), sched_getcpu());'
HOSTED = (
    '{ char h[64] = ""; gethostname(h, sizeof h); printf("host=%s rank=%d thread=%d cpu=%d\\n",'
    " h, rank, omp_get_thread_num(), sched_getcpu()); }"
)


def _source() -> str:
    assert REPORT in HYBRID_C, "test_mpi_families.HYBRID_C changed its report line"
    return HYBRID_C.replace(REPORT, HOSTED).replace("<time.h>", "<time.h>\n#include <unistd.h>")


@pytest.fixture(scope="module", params=sorted(MPICC))
def program(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """(launcher, the hybrid program built with its MPI) in the repository's build/, which
    every node of the local cluster sees."""
    name = request.param
    if REGISTRY[name].detect() is None or not MPICC[name].exists():
        pytest.skip(f"{name} not installed (make setup-mpis)")
    d = REPO / "build" / "test-mpi-multinode"
    d.mkdir(parents=True, exist_ok=True)
    (d / "hosted.c").write_text(_source())
    exe = d / f"hybrid-{name}"
    env = {"I_MPI_ROOT": str(MPICC[name].parents[1]), "I_MPI_CC": "cc", "PATH": "/usr/bin:/bin"}
    subprocess.run([str(MPICC[name]), "-fopenmp", "-O1", str(d / "hosted.c"), "-o", str(exe)],
                   check=True, timeout=120, env=env)  # fmt: skip
    return name, exe


def _job(cluster: SlurmCluster, tmp_path: Path, sbatch: str, run: str) -> tuple[int, str]:
    """One sbatch job (``sbatch`` options) running ``run``: (exit status, output)."""
    script = tmp_path / "job.sbatch"
    script.write_text(
        f"#!/bin/bash\n#SBATCH {sbatch} --time=3\n"
        f"export PATH={venv_bin('topobind').parent}:$PATH\n"
        f"unset SLURM_MPI_TYPE I_MPI_PMI_LIBRARY\n{run}\n"
    )
    env = {k: v for k, v in cluster.env.items() if not k.startswith(("SLURM_MPI", "I_MPI"))}
    job = sbatch_wait(script, cluster=cluster, env=env, workdir=tmp_path, timeout=240)
    return job.returncode, job.output


#: (sbatch options, ranks per node, threads per rank, nodes)
SHAPES = {
    "3-nodes-1x2": ("-N 3 --ntasks-per-node=1 -c 2 --exclusive", 1, 2, 3),
    "2-nodes-2x1": ("-N 2 --ntasks-per-node=2 -c 1 --exclusive", 2, 1, 2),
    # one CPU of each node: the job's share hides a PU (Intel MPI: the per-rank step binds)
    "2-nodes-share": ("-N 2 --ntasks-per-node=1 -c 1", 1, 1, 2),
}

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(node\d)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s*$", re.M)


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hydra_places_every_node(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    program: tuple[str, Path],
    shape: str,
    tmp_path: Path,
) -> None:
    name, exe = program
    sbatch, ppn, threads, nodes = SHAPES[shape]
    run = shlex.join(["topobind", "run", "--layout", "compact", "--threads", str(threads),
                      "--launcher", name, "--verify", "--verify-running", "--sample-ms", "1500",
                      "--", str(exe), "3000"])  # fmt: skip
    code, out = _job(slurm_cluster3, tmp_path, sbatch, run)
    assert code == 0, out
    n = ppn * nodes
    assert f"verify: all {n * threads} threads on their planned CPUs, bound to them" in out
    assert f"the program's {n * threads} threads ran on their planned CPUs" in out, out
    assert f"size={n} sum={n}" in out, out  # one MPI world over the nodes, not singletons
    # compact: local rank k's threads on CPUs k*threads .. ; ranks in node order (block)
    want = {
        (f"node{r // ppn + 1}", r, t, (r % ppn) * threads + t)
        for r in range(n)
        for t in range(threads)
    }
    seen = re.findall(r"host=(node\d) rank=(\d+) thread=(\d+) cpu=(\d+)", out)
    assert {(h, int(r), int(t), int(c)) for h, r, t, c in seen} == want, out
    rows = ROW.findall(out)  # the running program's sampled threads
    assert len(rows) == n * threads, out
    for rank, thread, host, planned, actual, affinity, status in rows:
        cpu = (int(rank) % ppn) * threads + int(thread)
        assert host == f"node{int(rank) // ppn + 1}", out
        assert (planned, actual, affinity, status) == (str(cpu), str(cpu), str(cpu), "OK"), out


@pytest.fixture
def node3_cpu0_taken(slurm_cluster3: SlurmCluster) -> Iterator[None]:  # noqa: F811
    """Another job holds one CPU of node3 (Slurm gives it CPU 0) for the test's duration."""
    out = slurm_cluster3.run(["sbatch", "--parsable", "-w", "node3", "-n", "1", "-c", "1",
                              "--time=3", "-o", "/dev/null", "--wrap", "sleep 170"])  # fmt: skip
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 60
        while "RUNNING" not in slurm_cluster3.run(["squeue", "-h", "-j", job, "-o", "%T"]).stdout:
            assert time.monotonic() < deadline, "the job holding node3's CPU did not start"
            time.sleep(0.2)
        yield
    finally:
        slurm_cluster3.run(["scancel", job])


@pytest.mark.slow
def test_nodes_holding_different_shares_get_a_plan_each(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    program: tuple[str, Path],
    node3_cpu0_taken: None,
    tmp_path: Path,
) -> None:
    """-N 3 -n 5 beside a job on node3's CPU 0: node1 and node2 hold 2 CPUs (2 ranks each),
    node3 holds CPU 1 only (1 rank): one Hydra launch over a host file, each rank bound by
    the per-rank step to its group's plan (rank 4 on CPU 1 of node3, not CPU 0)."""
    name, exe = program
    run = shlex.join(["topobind", "run", "--layout", "compact", "--launcher", name, "--verify",
                      "--verify-running", "--sample-ms", "1500", "--", str(exe),
                      "3000"])  # fmt: skip
    code, out = _job(slurm_cluster3, tmp_path, "-N 3 -n 5", run)
    assert code == 0, out
    assert "verify: all 5 threads on their planned CPUs, bound to them" in out, out
    assert "size=5 sum=5" in out, out
    want = {("node1", 0, 0), ("node1", 1, 1), ("node2", 2, 0), ("node2", 3, 1), ("node3", 4, 1)}
    seen = re.findall(r"host=(node\d) rank=(\d+) thread=0 cpu=(\d+)", out)
    assert {(h, int(r), int(c)) for h, r, c in seen} == want, out
    rows = {(h, int(r), int(a), aff, st) for r, _t, h, _p, a, aff, st in ROW.findall(out)}
    assert rows == {(h, r, c, str(c), "OK") for h, r, c in want}, out


@pytest.fixture(scope="module")
def impi_program() -> Path:
    mpicc = MPICC["intelmpi"]
    if REGISTRY["intelmpi"].detect() is None or not mpicc.exists():
        pytest.skip("Intel MPI not installed (make setup-mpis)")
    d = REPO / "build" / "test-mpi-multinode"
    d.mkdir(parents=True, exist_ok=True)
    (d / "hosted.c").write_text(_source())
    exe = d / "hybrid-impi-srun"
    env = {"I_MPI_ROOT": str(mpicc.parents[1]), "I_MPI_CC": "cc", "PATH": "/usr/bin:/bin"}
    subprocess.run([str(mpicc), "-fopenmp", "-O1", str(d / "hosted.c"), "-o", str(exe)],
                   check=True, timeout=120, env=env)  # fmt: skip
    return exe


@pytest.mark.slow
def test_intel_mpi_is_told_from_mpich(impi_program: Path, tmp_path: Path) -> None:
    linked = linked_mpi(str(impi_program))
    assert linked is not None and linked.family == "mpich" and is_intel_mpi(linked)
    mpicc = MPICC["mpich"]
    if not mpicc.exists():
        pytest.skip("MPICH not installed (make setup-mpis)")
    (tmp_path / "m.c").write_text(HYBRID_C)
    subprocess.run([str(mpicc), "-fopenmp", str(tmp_path / "m.c"), "-o", str(tmp_path / "m")],
                   check=True, timeout=120)  # fmt: skip
    mpich = linked_mpi(str(tmp_path / "m"))
    assert mpich is not None and mpich.family == "mpich" and not is_intel_mpi(mpich)


@pytest.mark.slow
def test_intel_mpi_pmi_library_by_srun_plugin(
    impi_program: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    linked = linked_mpi(str(impi_program))
    assert linked is not None
    monkeypatch.delenv("I_MPI_PMI_LIBRARY", raising=False)
    assert intel_pmi(linked, "pmix") == ({}, [])  # Intel MPI finds PMIx by itself
    lib = slurm_pmi2_library()
    env, notes = intel_pmi(linked, "pmi2")
    if lib is None:
        assert env == {} and "libpmi2-0" in notes[0] and "I_MPI_PMI_LIBRARY" in notes[0]
    else:
        assert env == {"I_MPI_PMI_LIBRARY": lib} and Path(lib).name.startswith("libpmi2.so")
    monkeypatch.setenv("I_MPI_PMI_LIBRARY", "/opt/slurm/lib/libpmi2.so")
    assert intel_pmi(linked, "pmi2") == ({}, [])  # the user's own choice stands
    with pytest.raises(TopobindError, match=r"--mpi=pmix: every rank .*'--mpi=pmi2' or unset"):
        intel_pmi(linked, "pmix")


@pytest.mark.slow
def test_intel_mpi_program_under_srun_gets_slurms_pmi2(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    impi_program: Path,
    tmp_path: Path,
) -> None:
    """MpiDefault=none: topobind run (srun) adds --mpi=pmi2 and I_MPI_PMI_LIBRARY; Intel MPI
    says which PMI it used (I_MPI_DEBUG=5: 'PMI API: pmi2'; its own PMI-1 client says
    'pmi'). Then the same library under --mpi=pmix is refused before any rank starts."""
    if slurm_pmi2_library() is None:
        pytest.skip("Slurm's PMI-2 library is not installed (Debian: libpmi2-0)")
    tb = ["topobind", "run", "--layout", "compact", "--threads", "2", "--verify"]
    run = "\n".join([
        "I_MPI_DEBUG=5 " + shlex.join([*tb, "--", str(impi_program), "300"]),
        "echo first=$?",
        f"I_MPI_PMI_LIBRARY={slurm_pmi2_library()} "
        + shlex.join([*tb, "--srun-args=--mpi=pmix", "--", str(impi_program), "300"]),
        "echo second=$?",
    ])  # fmt: skip
    code, out = _job(slurm_cluster3, tmp_path, "-N 2 --ntasks-per-node=1 -c 2 --exclusive", run)
    assert code == 0, out
    assert "first=0" in out and "srun --mpi=pmi2 starts its MPI" in out, out
    assert f"I_MPI_PMI_LIBRARY={slurm_pmi2_library()}" in out
    assert "MPI startup(): PMI API: pmi2" in out, out  # Intel MPI loaded Slurm's libpmi2
    assert "verify: all 4 threads on their planned CPUs" in out and "size=2 sum=2" in out
    seen = re.findall(r"host=(node\d) rank=(\d) thread=(\d) cpu=(\d)", out)
    assert sorted(seen) == [(f"node{r + 1}", str(r), str(t), str(t)) for r in (0, 1)
                            for t in (0, 1)], out  # fmt: skip
    assert "second=2" in out and "is Slurm's PMI-2 library but srun starts --mpi=pmix" in out
