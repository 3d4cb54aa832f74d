"""From a Plan to the final command line: which runtime am I in, which launcher, which flags.

- Inside a Slurm allocation (``SLURM_JOB_ID`` set) the default launcher is ``srun``;
  outside, ``mpirun`` for several ranks and no launcher for one.
- The OpenMPI flavour (4.x or 5.x) is read from ``mpirun --version``.
- Every rank runs through ``topobind rank-exec``, which exports the exact ``OMP_PLACES`` of
  its local rank (from the plan file) before it execs the program.
- On several Slurm nodes the plan (one node) is applied on each: ``srun --nodes=N
  --ntasks=R*N``, ``mpirun -np R*N``, and a rankfile with one block per node (host names
  from ``scontrol show hostnames``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

from topobind import slurm
from topobind.emit.omp import omp_env
from topobind.emit.openmpi import openmpi_argv
from topobind.emit.srun import STEP_NOTE, srun_argv
from topobind.errors import TopobindError
from topobind.plan import Plan

LAUNCHERS = ("srun", "mpirun", "none")


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]  # variables to export on top of the caller's environment
    launcher: str
    mpi: str | None = None  # "openmpi4" | "openmpi5"
    rankfile: tuple[str, str] | None = None  # (path, text) to write before launching
    notes: list[str] = field(default_factory=list)
    nodes: int = 1  # nodes the launch spans (the plan is applied on each)


def in_slurm(env: dict[str, str] | None = None) -> bool:
    return slurm.in_slurm(env)


def slurm_nodes(env: dict[str, str] | None = None) -> int:
    return slurm.nodes(env)


def find_mpirun(prefer: str | None = None) -> tuple[str, str]:
    """(path, flavour) of the mpirun to use: ``openmpi4`` or ``openmpi5``."""
    candidates: list[str] = []
    if prefer == "openmpi4":
        candidates = ["/usr/bin/mpirun"]
    elif prefer == "openmpi5":
        candidates = [os.path.join(os.path.dirname(sys.executable), "mpirun")]
    found = [c for c in candidates if os.path.exists(c)] or [
        p for p in [shutil.which("mpirun")] if p
    ]
    if not found:
        raise TopobindError("mpirun not found; install OpenMPI (make setup) or use --launcher srun")
    path = found[0]
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Open MPI\)?\s+(\d+)\.", out)
    if not m:
        raise TopobindError(f"{path} is not OpenMPI (its --version says {out.strip()[:60]!r})")
    major = int(m.group(1))
    if major not in (4, 5):
        raise TopobindError(f"{path} is OpenMPI {major}.x; topobind emits flags for 4.x and 5.x")
    return path, f"openmpi{major}"


def choose_launcher(plan: Plan, requested: str | None) -> str:
    if requested == "srun" and not in_slurm():
        raise TopobindError(
            "--launcher srun needs a Slurm allocation (SLURM_JOB_ID unset); use salloc/sbatch "
            "or --launcher mpirun"
        )
    if requested:
        return requested
    if in_slurm():
        return "srun"
    return "mpirun" if plan.nranks > 1 else "none"


def rank_exec_prefix(plan_file: str) -> list[str]:
    return [sys.executable, "-m", "topobind.cli", "rank-exec", "--plan", plan_file, "--"]


def build(
    plan: Plan,
    program: list[str],
    plan_file: str,
    launcher: str | None = None,
    mpi: str | None = None,
    rankfile_path: str = "topobind.rankfile",
) -> Launch:
    if not program:
        raise TopobindError("no program given; put it after '--', e.g. topobind run -- ./a.out")
    which = choose_launcher(plan, launcher)
    env = dict(omp_env(plan))
    env["TOPOBIND_LAYOUT"] = plan.layout
    if which == "none":
        if plan.nranks > 1:
            raise TopobindError(
                f"the plan has {plan.nranks} ranks; --launcher none runs one process "
                "(use --ranks 1 or a launcher)"
            )
        return Launch(argv=list(program), env=env, launcher="none")
    wrapped = rank_exec_prefix(plan_file) + list(program)
    nodes = slurm_nodes() if in_slurm() else 1
    if which == "srun":
        s = srun_argv(plan)
        argv = [s.argv[0], f"--nodes={nodes}", f"--ntasks={plan.nranks * nodes}", *s.argv[1:]]
        # The srun line is topobind's own (no -c/--exact/--hint, masks from the job's CPUs):
        # the advice for hand-written srun lines does not apply.
        notes = [n for n in s.notes if n != STEP_NOTE]
        return Launch(argv=argv + wrapped, env=env, launcher="srun", notes=notes, nodes=nodes)
    if which == "mpirun":
        path, flavour = find_mpirun(mpi)
        version = 5 if flavour == "openmpi5" else 4
        m = openmpi_argv(plan, version, rankfile_path=rankfile_path, exact_places=True)
        if nodes > 1:
            # The same plan on every node: -np is ranks per node x nodes, and a rankfile
            # names every node (scontrol show hostnames $SLURM_JOB_NODELIST).
            if m.rankfile is not None:
                m = openmpi_argv(
                    plan,
                    version,
                    rankfile_path=rankfile_path,
                    exact_places=True,
                    hosts=slurm.hostnames(),
                )
            m.argv[2] = str(plan.nranks * nodes)  # ppr flags: the same per node
        argv = [path, *m.argv[1:]]
        if os.geteuid() == 0:
            env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
            env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
        # Exported OMP_* reach every rank; mpirun -x is not needed with OpenMPI's env forwarding
        # of OMP_* (OpenMPI forwards the launching environment for local ranks).
        rankfile = (rankfile_path, m.rankfile) if m.rankfile is not None else None
        return Launch(
            argv=argv + wrapped,
            env=env,
            launcher="mpirun",
            mpi=flavour,
            rankfile=rankfile,
            notes=m.notes,
            nodes=nodes,
        )
    raise TopobindError(f"unknown launcher {which!r}; choose one of {', '.join(LAUNCHERS)}")


#: The launcher's rank variables, innermost launcher first: an mpirun inside a Slurm job
#: inherits the batch step's SLURM_PROCID=0 and SLURM_LOCALID=0 in every rank it starts, so
#: OpenMPI's own variables (set only by mpirun/prterun) and PMIx's must win over Slurm's.
LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK", "SLURM_LOCALID")
RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")


def local_rank(env: dict[str, str] | None = None) -> int | None:
    e = os.environ if env is None else env
    for var in (*LOCAL_RANK_VARS, *RANK_VARS):
        if e.get(var, "").isdigit():
            return int(e[var])
    return None
