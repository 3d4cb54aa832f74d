"""``topobind run``, ``topobind env``, ``topobind verify`` and the per-rank ``rank-exec``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from typing import Any

from topobind import jsonfmt
from topobind.commands.common import (
    add_layout_args,
    add_topology_arg,
    plan_for_job,
    print_warnings,
)
from topobind.emit import launch_dict
from topobind.emit.omp import format_places, omp_env, omp_notes
from topobind.errors import CannotRun, TopobindError
from topobind.fsutil import atomic_write_text
from topobind.launch import LAUNCHERS, Launch, build, in_slurm, local_rank, slurm_nodes
from topobind.layouts import per_domain_names
from topobind.plan import Plan, PlannedRank, read_plan_file
from topobind.verify import all_ok, compare, parse_probe_output, rows_json, table

RUN_EPILOG = """\
examples (in an sbatch script, or on a workstation):
  topobind run --layout every-other-core -- ./my_mpi_app input.dat
  topobind run --layout per-l3 --verify -- ./hybrid_app      # probe first, stop if wrong
  topobind run --layout spread --ranks 1 --threads 8 -- ./omp_app
  topobind run --dry-run --layout compact --ranks 2 -- ./app  # print, do not run

""" + textwrap.fill(
    "Inside Slurm the default launcher is srun (one --cpu-bind mask per task); outside, mpirun "
    "(OpenMPI 4 or 5, detected) for several ranks, none for one. Inside Slurm, without --ranks, "
    "the ranks per node are the job's tasks per node (SLURM_NTASKS_PER_NODE, or SLURM_NTASKS / "
    "SLURM_JOB_NUM_NODES), except for layouts with one rank per domain "
    f"({per_domain_names()}); the plan is applied on every node of the job. Every rank runs "
    "through 'topobind rank-exec', which exports the exact OMP_PLACES of its local rank. "
    "Warnings and launch notes go to stderr ('topobind: warning: ...'). The program's exit "
    "status is passed through; a program that cannot be started exits 127 (not found) or 126.",
    width=92,
    break_on_hyphens=False,
)

VERIFY_EPILOG = """\
examples:
  topobind verify --layout compact --threads 2 -- env OMP_NUM_THREADS=2 OMP_PLACES={0},{1}
  topobind verify --plan plan.json -- srun -n 2 --cpu-bind=mask_cpu:0x1,0x2
  topobind verify --layout compact --ranks 2 -- mpirun -np 2 --map-by core --bind-to core

The placement probe (kernels/bin/whereami) is appended to the launch command. A thread is
OK when it ran on its planned CPU and its affinity mask lies inside its planned place; a
wider mask is a MISMATCH ("unbound"): the binding was ignored. The plan describes one node;
each host's ranks, in rank order, are compared with the plan's ranks 0, 1, ... Exit status:
0 when every rank and thread is bound to its planned CPU, 1 otherwise, 127/126 when the
launch command cannot be started.
"""


def add_subparser(subparsers: Any) -> None:
    run = subparsers.add_parser(
        "run",
        help="launch a program with the planned binding (srun, mpirun or none)",
        description="Plan for this job's allocation, export OMP_*, and launch the program.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _plan_args(run)
    run.add_argument("--launcher", choices=LAUNCHERS, help="default: srun in Slurm, else mpirun")
    run.add_argument("--mpi", choices=("openmpi4", "openmpi5"), help="which mpirun to use")
    run.add_argument("--verify", action="store_true", help="run the placement probe first")
    run.add_argument("--dry-run", action="store_true", help="print the command, do not run")
    run.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    run.set_defaults(func=run_run)

    env = subparsers.add_parser(
        "env",
        help="print the OMP_* exports of a plan, for eval in job scripts",
        description='For scripts that launch by themselves: eval "$(topobind env --layout L)"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _plan_args(env)
    env.set_defaults(func=run_env)

    verify = subparsers.add_parser(
        "verify",
        help="run the placement probe under a launch command and compare with the plan",
        description="Run kernels/bin/whereami under LAUNCH COMMAND; table of planned vs actual.",
        epilog=VERIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _plan_args(verify)
    verify.add_argument("--plan", metavar="FILE", help="a plan JSON (topobind plan -f json)")
    verify.add_argument("--format", "-f", choices=("text", "json"), default="text")
    verify.add_argument(
        "--nodes",
        type=int,
        metavar="N",
        help="nodes the launch command spans, each running the plan's ranks (default: the "
        "job's nodes inside Slurm, else the hosts the probe reports)",
    )
    verify.add_argument("command", nargs=argparse.REMAINDER, help="-- LAUNCH COMMAND...")
    verify.set_defaults(func=run_verify)

    rank_exec = subparsers.add_parser(
        "rank-exec",
        help="(used by topobind run) export this rank's exact OMP_PLACES, then exec",
    )
    rank_exec.add_argument("--plan", required=True, metavar="FILE")
    rank_exec.add_argument("program", nargs=argparse.REMAINDER)
    rank_exec.set_defaults(func=run_rank_exec)


def _plan_args(p: argparse.ArgumentParser) -> None:
    add_topology_arg(p)
    add_layout_args(p, required=False)


def _strip_dashes(argv: list[str]) -> list[str]:
    return argv[1:] if argv and argv[0] == "--" else argv


def _probe() -> str:
    from topobind.kernels import find_kernel

    try:
        return str(find_kernel("whereami"))
    except TopobindError as exc:
        raise TopobindError(f"placement probe not found ({exc}); run 'make kernels'") from exc


def _workdir() -> str:
    """Scratch directory for the plan file (and rankfile) every rank reads: on a shared file
    system when the job spans several nodes ($TOPOBIND_WORKDIR, else the submit directory)."""
    base = os.environ.get("TOPOBIND_WORKDIR") or os.environ.get("SLURM_SUBMIT_DIR") or os.getcwd()
    try:
        return tempfile.mkdtemp(prefix=".topobind-run-", dir=base)
    except OSError as exc:
        raise TopobindError(
            f"cannot create topobind run's scratch directory in {base}: {exc.strerror}; set "
            "TOPOBIND_WORKDIR to a writable directory (shared by the job's nodes)"
        ) from exc


def _prepare(plan: Plan, program: list[str], args: argparse.Namespace, workdir: str) -> Launch:
    plan_file = os.path.join(workdir, "plan.json")
    launch = build(
        plan, program, plan_file, args.launcher, args.mpi, os.path.join(workdir, "rankfile")
    )
    if launch.launcher != "none":  # only the ranks of a launcher read the plan file
        atomic_write_text(plan_file, jsonfmt.dumps(plan.to_dict(launch_dict(plan))))
    if launch.rankfile is not None:
        atomic_write_text(*launch.rankfile)
    return launch


def _execute(launch: Launch, capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run in a new process group; Ctrl-C / SIGTERM stop the whole group."""
    env = {**os.environ, **launch.env}
    try:
        proc = subprocess.Popen(
            launch.argv,
            env=env,
            start_new_session=True,
            text=True,
            stdout=subprocess.PIPE if capture else None,
        )
    except OSError as exc:  # as a shell says it: exit 127 (not found) or 126
        raise CannotRun(launch.argv[0], exc) from exc

    def stop(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        out, _ = proc.communicate()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # nothing left running
    return subprocess.CompletedProcess(launch.argv, proc.returncode, out or "", "")


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


def _verify_rows(plan: Plan, out: str, nodes: int) -> list[Any]:
    planned = [PlannedRank(r.rank, r.places, r.cpus) for r in plan.ranks]
    return compare(planned, parse_probe_output(out), nnodes=nodes)


def _dry_run(plan: Plan, program: list[str], args: argparse.Namespace) -> int:
    """Print the exact command. Files the command refers to (plan file, rankfile) go to a
    new directory under $TMPDIR, kept and named only when the command needs them; nothing
    is written to the working directory. A job on several nodes needs them where every node
    reads them: the shared scratch directory of a real run (see :func:`_workdir`)."""
    workdir = _workdir() if slurm_nodes() > 1 else tempfile.mkdtemp(prefix="topobind-dry-run-")
    try:
        launch = _prepare(plan, program, args, workdir)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    print_warnings(plan, launch.notes)
    for k, v in launch.env.items():
        print(f"export {k}={shlex.quote(v)}")
    print(shlex.join(launch.argv))
    if launch.rankfile:
        print(f"# rankfile {launch.rankfile[0]}:\n" + launch.rankfile[1], end="")
    if launch.launcher == "none":
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"# files this command reads (kept; remove when done): {workdir}")
    return 0


def _with_program(launch: Launch, program: list[str], other: str) -> Launch | None:
    """The same launch (flags, plan file, rankfile) running ``other`` instead of ``program``,
    or None when the launch's argv does not end with the program."""
    n = len(program)
    if launch.argv[-n:] != program:
        return None
    return dataclasses.replace(launch, argv=[*launch.argv[:-n], other])


def run_run(args: argparse.Namespace) -> int:
    program = _strip_dashes(args.program)
    if not program:
        raise TopobindError("no program given; put it after '--', e.g. topobind run -- ./a.out")
    plan = plan_for_job(args)
    if args.dry_run:
        return _dry_run(plan, program, args)
    workdir = _workdir()
    try:
        launch = _prepare(plan, program, args, workdir)
        print_warnings(plan, launch.notes)
        if args.verify:
            probe_launch = _with_program(launch, program, _probe())
            if probe_launch is None:  # a launch that does not end in the program itself
                probe_launch = _prepare(plan, [_probe()], args, workdir)
            done = _execute(probe_launch, capture=True)
            if done.returncode != 0:
                print(
                    f"topobind: error: the placement probe failed (exit {done.returncode})",
                    file=sys.stderr,
                )
                return _status(done.returncode) or 1
            rows = _verify_rows(plan, done.stdout, probe_launch.nodes)
            if not all_ok(rows):
                print(table(rows), file=sys.stderr)
                print(
                    "topobind: error: placement differs from the plan; not launching",
                    file=sys.stderr,
                )
                return 1
            print(
                f"topobind: verify: all {len(rows)} threads on their planned CPUs, bound to them",
                file=sys.stderr,
            )
        done = _execute(launch)
        if done.returncode != 0:
            print(
                f"topobind: {launch.argv[0]} exited with status {_status(done.returncode)}",
                file=sys.stderr,
            )
        return _status(done.returncode)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_env(args: argparse.Namespace) -> int:
    plan = plan_for_job(args)
    print_warnings(plan, omp_notes(plan))
    for k, v in {**omp_env(plan), "TOPOBIND_LAYOUT": plan.layout}.items():
        print(f"export {k}={shlex.quote(v)}")
    return 0


def run_verify(args: argparse.Namespace) -> int:

    command = _strip_dashes(args.command)
    if not command:
        raise TopobindError("no launch command given; put it after '--' (e.g. -- srun -n 2)")
    if args.nodes is not None and args.nodes < 1:
        raise TopobindError(f"--nodes must be at least 1 (got {args.nodes})")
    if args.plan:
        planned = read_plan_file(args.plan)
    else:
        plan = plan_for_job(args)
        print_warnings(plan)
        planned = [PlannedRank(r.rank, r.places, r.cpus) for r in plan.ranks]
    done = _execute(Launch(argv=[*command, _probe()], env={}, launcher="given"), capture=True)
    if done.returncode != 0:
        print(
            f"topobind: error: the launch command exited with {_status(done.returncode)}",
            file=sys.stderr,
        )
        return _status(done.returncode) or 1
    nodes = args.nodes if args.nodes is not None else (slurm_nodes() if in_slurm() else None)
    rows = compare(planned, parse_probe_output(done.stdout), nnodes=nodes)
    if args.format == "json":
        print(jsonfmt.dumps({"ok": all_ok(rows), "rows": rows_json(rows)}))
    else:
        print(table(rows))
    return 0 if all_ok(rows) else 1


def run_rank_exec(args: argparse.Namespace) -> int:

    program = _strip_dashes(args.program)
    if not program:
        raise TopobindError("rank-exec: no program given")
    try:
        planned = read_plan_file(args.plan)
    except TopobindError as exc:
        raise TopobindError(f"rank-exec: {exc}") from exc
    rank = local_rank()
    if rank is not None:
        os.environ["OMP_PLACES"] = format_places(list(planned[rank % len(planned)].places))
    try:
        os.execvp(program[0], program)
    except OSError as exc:  # as a shell says it: exit 127 (not found) or 126
        raise CannotRun(program[0], exc) from exc
    return 127  # not reached
