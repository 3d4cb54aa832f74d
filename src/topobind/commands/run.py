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
from typing import Any

from topobind import jsonfmt
from topobind.commands.common import (
    add_layout_args,
    add_topology_arg,
    plan_for_job,
    print_warnings,
)
from topobind.emit import launch_dict
from topobind.emit.devices import env_notes
from topobind.emit.omp import format_places, omp_env, omp_notes
from topobind.errors import CannotRun, TopobindError
from topobind.fsutil import atomic_write_text
from topobind.launch import (
    LAUNCHERS,
    Launch,
    build,
    find_mpirun,
    in_slurm,
    local_rank,
    slurm_nodes,
)
from topobind.plan import Plan, PlannedRank, ranks_from_json
from topobind.verify import all_ok, compare, parse_probe_output, rows_json, table
from topobind.verify_devices import check_env, env_table, why_variables_only

RUN_EPILOG = """\
examples (in an sbatch script, or on a workstation):
  topobind run --layout every-other-core -- ./my_mpi_app input.dat
  topobind run --layout per-l3 --verify -- ./hybrid_app      # probe first, stop if wrong
  topobind run --layout spread --ranks 1 --threads 8 -- ./omp_app
  topobind run --dry-run --layout compact --ranks 2 -- ./app  # print, do not run

Inside Slurm the default launcher is srun (one --cpu-bind mask per task); outside, mpirun
(OpenMPI 4 or 5, detected) for several ranks, none for one. Inside Slurm, without --ranks,
the ranks per node are the job's tasks per node (SLURM_NTASKS_PER_NODE, or SLURM_NTASKS /
SLURM_JOB_NUM_NODES), except for layouts with one rank per domain (per-l3, per-numa,
per-socket, l3-groups:N); the plan is applied on every node of the job. Every rank runs
through 'topobind rank-exec', which exports the exact OMP_PLACES of its local rank.
Warnings and launch notes go to stderr ('topobind: warning: ...'). The program's exit status
is passed through; a program that cannot be started exits 127 (not found) or 126.
"""

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
    planned = [PlannedRank(r.rank, r.places, r.cpus, r.env) for r in plan.ranks]
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
    node_plans = _node_plans(args)
    if node_plans is not None:  # the job's nodes differ: a plan per group of nodes
        return _run_per_node(node_plans, program, args)
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
            env_rows = check_env(  # per-gpu plans: each rank's device variables
                [PlannedRank(r.rank, r.places, r.cpus, r.env) for r in plan.ranks], done.stdout
            )
            if not all(r.ok for r in env_rows):
                print(env_table(env_rows, why_variables_only()), file=sys.stderr)
                print("topobind: error: device variables differ from the plan", file=sys.stderr)
                return 1
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
            if env_rows:
                print(
                    f"topobind: verify: all {len(env_rows)} device variables as planned"
                    f" (the variables only{why_variables_only()})",
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


def _node_plans(args: argparse.Namespace) -> list[Any] | None:
    """Plans per group of nodes when the job holds different shares of its nodes (see
    topobind.pernode); None on one node or when one plan fits every node."""
    if not in_slurm() or slurm_nodes() < 2:
        return None
    from topobind import pernode
    from topobind.commands.common import topology_from

    node_plans = pernode.plans(args, topology_from(args))
    if node_plans is not None and args.launcher == "none":
        raise TopobindError("--launcher none runs one process; the job spans several nodes")
    return node_plans


def _run_per_node(node_plans: list[Any], program: list[str], args: argparse.Namespace) -> int:
    from topobind import pernode
    from topobind.launch import rank_exec_prefix

    for np_ in node_plans:
        print_warnings(np_.plan)
    workdir = _workdir()  # several nodes: where every node reads the plan files
    keep = False
    try:
        files = [os.path.join(workdir, f"plan-{k}.json") for k in range(len(node_plans))]
        for f, np_ in zip(files, node_plans, strict=True):
            atomic_write_text(f, jsonfmt.dumps(np_.plan.to_dict(launch_dict(np_.plan))))

        env = {"TOPOBIND_LAYOUT": args.layout}
        rankfile = None
        if args.launcher == "mpirun":
            path, flavour = find_mpirun(args.mpi)
            version = 5 if flavour == "openmpi5" else 4
            rankfile = (
                os.path.join(workdir, "rankfile"),
                pernode.rankfile_per_node(node_plans, version),
            )
            atomic_write_text(*rankfile)
            if os.geteuid() == 0:
                env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

        def launch_of(prog: list[str]) -> Launch:
            step = [rank_exec_prefix(f) + prog for f in files]
            if rankfile is None:
                argv = pernode.srun_argv_per_node(node_plans, step)
                return Launch(argv=argv, env=env, launcher="srun")
            argv = pernode.mpirun_argv_per_node(node_plans, step, version, rankfile[0])
            return Launch(argv=[path, *argv[1:]], env=env, launcher="mpirun")

        launch = launch_of(program)
        if args.dry_run:
            print("# the job's nodes hold different shares: one plan per group of nodes")
            for np_ in node_plans:
                print(f"#   {pernode.describe(np_.share)}")
            for k, v in launch.env.items():
                print(f"export {k}={shlex.quote(v)}")
            print(shlex.join(launch.argv))
            if rankfile is not None:
                print(f"# rankfile {rankfile[0]}:\n" + rankfile[1], end="")
            print(f"# files this command reads (kept; remove when done): {workdir}")
            keep = True
            return 0
        if args.verify:
            done = _execute(launch_of([_probe()]), capture=True)
            if done.returncode != 0:
                print(
                    f"topobind: error: the placement probe failed (exit {done.returncode})",
                    file=sys.stderr,
                )
                return _status(done.returncode) or 1
            rows = pernode.compare_per_node(node_plans, parse_probe_output(done.stdout))
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
            status = _status(done.returncode)
            print(f"topobind: {launch.argv[0]} exited with status {status}", file=sys.stderr)
        return _status(done.returncode)
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run_env(args: argparse.Namespace) -> int:
    plan = plan_for_job(args)
    print_warnings(plan, omp_notes(plan) + env_notes(plan))  # per-gpu: per-rank variables
    for k, v in {**omp_env(plan), "TOPOBIND_LAYOUT": plan.layout}.items():
        print(f"export {k}={shlex.quote(v)}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    import json

    command = _strip_dashes(args.command)
    if not command:
        raise TopobindError("no launch command given; put it after '--' (e.g. -- srun -n 2)")
    if args.nodes is not None and args.nodes < 1:
        raise TopobindError(f"--nodes must be at least 1 (got {args.nodes})")
    if args.plan:
        try:
            with open(args.plan, encoding="utf-8") as fh:
                planned = ranks_from_json(json.load(fh))
        except (OSError, ValueError) as exc:
            raise TopobindError(f"cannot read plan {args.plan!r}: {exc}") from exc
    else:
        plan = plan_for_job(args)
        print_warnings(plan)
        planned = [PlannedRank(r.rank, r.places, r.cpus, r.env) for r in plan.ranks]
    done = _execute(Launch(argv=[*command, _probe()], env={}, launcher="given"), capture=True)
    if done.returncode != 0:
        print(
            f"topobind: error: the launch command exited with {_status(done.returncode)}",
            file=sys.stderr,
        )
        return _status(done.returncode) or 1
    nodes = args.nodes if args.nodes is not None else (slurm_nodes() if in_slurm() else None)
    rows = compare(planned, parse_probe_output(done.stdout), nnodes=nodes)
    env_rows = check_env(planned, done.stdout)  # per-gpu plans: the device variables
    ok = all_ok(rows) and all(r.ok for r in env_rows)
    if args.format == "json":
        doc = {"ok": ok, "rows": rows_json(rows)}
        if env_rows:
            doc["device_env"] = [dataclasses.asdict(r) | {"ok": r.ok} for r in env_rows]
        print(jsonfmt.dumps(doc))
    else:
        print(table(rows))
        if env_rows:
            print(env_table(env_rows, why_variables_only()))
    return 0 if ok else 1


def run_rank_exec(args: argparse.Namespace) -> int:
    import json

    program = _strip_dashes(args.program)
    if not program:
        raise TopobindError("rank-exec: no program given")
    try:
        with open(args.plan, encoding="utf-8") as fh:
            planned = ranks_from_json(json.load(fh))
    except (OSError, ValueError) as exc:
        raise TopobindError(f"rank-exec: cannot read plan {args.plan!r}: {exc}") from exc
    rank = local_rank()
    if rank is not None:
        mine = planned[rank % len(planned)]
        os.environ["OMP_PLACES"] = format_places(list(mine.places))
        os.environ.update(mine.env)  # per-gpu plans: the rank's GPU/NIC variables
    try:
        os.execvp(program[0], program)
    except OSError as exc:  # as a shell says it: exit 127 (not found) or 126
        raise CannotRun(program[0], exc) from exc
    return 127  # not reached
