"""``topobind run``, ``topobind env``, ``topobind verify`` (per-rank step: kernels/rankexec.c)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

from topobind import jsonfmt
from topobind.commands.common import (
    add_layout_args,
    add_topology_arg,
    plan_for_job,
    print_warnings,
)
from topobind.emit.devices import env_notes
from topobind.emit.omp import omp_notes
from topobind.errors import CannotRun, TopobindError
from topobind.launch import (
    LAUNCHERS,
    JobShape,
    Launch,
    build,
    in_slurm,
    job_env,
    job_shape,
    slurm_nodes,
    write_files,
)
from topobind.layouts import per_domain_names
from topobind.plan import Plan, PlannedRank, read_plan_file
from topobind.runner import run_process
from topobind.verify import (
    all_ok,
    compare,
    parse_probe_output,
    read_samples,
    rows_json,
    table,
)
from topobind.verify_devices import check_env, env_table, why_variables_only

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
    f"({per_domain_names()}); the plan is applied on every node of the job. Where the "
    "launcher's binding alone does not give every thread its planned PU, every rank runs "
    "through the per-rank step kernels/bin/rankexec (C, no interpreter), which exports the "
    "exact OMP_PLACES of its local rank from a file prepared once in a scratch directory only "
    "you can write. --verify runs the placement probe (kernels/bin/whereami) in the program's "
    "place first and does not launch the program when verification fails; --verify-running "
    "checks the program itself: the per-rank step samples where each rank's threads run "
    "(/proc) after start-up. Warnings and launch notes go to stderr ('topobind: warning: "
    "...'). The program's exit status is passed through; a program that cannot be started "
    "exits 127 (not found) or 126.",
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
    run.add_argument(
        "--verify",
        action="store_true",
        help="run the placement probe first; do not launch the program when it fails",
    )
    run.add_argument(
        "--verify-running",
        action="store_true",
        help="check the real program: sample where its threads run after start-up (see "
        "--sample-ms); exit 1 when they differ from the plan",
    )
    run.add_argument(
        "--sample-ms",
        type=int,
        default=1000,
        metavar="MS",
        help="with --verify-running: sample this long after each rank starts (default 1000)",
    )
    run.add_argument(
        "--rank-step",
        choices=("auto", "always", "never"),
        default="auto",
        help="the per-rank step (kernels/bin/rankexec): only where the launcher's binding "
        "does not give the exact places (auto), always, or never",
    )
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
    """Scratch directory for the per-rank step file (and rankfile) every rank reads: on a shared
    file system when the job spans several nodes ($TOPOBIND_WORKDIR, else the submit directory)."""
    base = os.environ.get("TOPOBIND_WORKDIR") or os.environ.get("SLURM_SUBMIT_DIR") or os.getcwd()
    try:
        return os.path.abspath(tempfile.mkdtemp(prefix=".topobind-run-", dir=base))
    except OSError as exc:
        raise TopobindError(
            f"cannot create topobind run's scratch directory in {base}: {exc.strerror}; set "
            "TOPOBIND_WORKDIR to a writable directory (shared by the job's nodes)"
        ) from exc


def _prepare(
    plan: Plan, program: list[str], args: argparse.Namespace, workdir: str, sample: bool = False
) -> Launch:
    shape = job_shape(
        plan,
        args.launcher,
        args.mpi,
        rank_step=args.rank_step,
        workdir=workdir,
        sample_ms=args.sample_ms if sample else None,
    )
    launch = build(shape, program)
    write_files(launch)
    return launch


def _execute(launch: Launch, capture: bool = False) -> subprocess.CompletedProcess[str]:
    """Run in a new process group; Ctrl-C / SIGTERM stop the whole group."""
    return run_process(launch.argv, env={**os.environ, **launch.env}, capture=capture)


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


def _verify_rows(plan: Plan, out: str, nodes: int) -> list[Any]:
    planned = [PlannedRank(r.rank, r.places, r.cpus, r.env) for r in plan.ranks]
    return compare(planned, parse_probe_output(out), nnodes=nodes)


def _dry_run(plan: Plan, program: list[str], args: argparse.Namespace) -> int:
    """Print the exact command. Files the command refers to (step file, rankfile) go to a
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
    for path, text in launch.files:
        print(f"# {os.path.basename(path)} ({path}):\n" + text, end="")
    if not launch.files:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"# files this command reads (kept; remove when done): {workdir}")
    return 0


def _with_program(launch: Launch, program: list[str], other: str) -> Launch | None:
    """The same launch (flags, step file, rankfile) running ``other`` instead of ``program``,
    or None when the launch's argv does not end with the program."""
    n = len(program)
    if launch.argv[-n:] != program:
        return None
    return dataclasses.replace(launch, argv=[*launch.argv[:-n], other])


def run_run(args: argparse.Namespace) -> int:
    program = _strip_dashes(args.program)
    if not program:
        raise TopobindError("no program given; put it after '--', e.g. topobind run -- ./a.out")
    if args.sample_ms < 0 or args.sample_ms > 600_000:
        raise TopobindError(f"--sample-ms must be 0 .. 600000 (got {args.sample_ms})")
    node_plans = _node_plans(args)
    if node_plans is not None:  # the job's nodes differ: a plan per group of nodes
        return _run_per_node(node_plans, program, args)
    plan = plan_for_job(args)
    if args.dry_run:
        return _dry_run(plan, program, args)
    _check_program(program[0])
    workdir = _workdir()
    try:
        launch = _prepare(plan, program, args, workdir, sample=args.verify_running)
        print_warnings(plan, launch.notes)
        if args.verify:
            status = _verify_first(plan, program, args, workdir, launch)
            if status:
                return status
        done = _execute(launch)
        if done.returncode != 0:
            print(
                f"topobind: {launch.argv[0]} exited with status {_status(done.returncode)}",
                file=sys.stderr,
            )
        status = _status(done.returncode)
        if args.verify_running:
            ok = _check_samples(plan, launch, workdir, args.sample_ms)
            status = status or (0 if ok else 1)
        return status
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
    from topobind.launch import find_mpirun, rank_step_argv, rank_step_text

    for np_ in node_plans:
        print_warnings(np_.plan)
    workdir = _workdir()  # several nodes: where every node reads the per-rank step files
    keep = False
    try:
        steps: list[list[str]] = []  # each group's per-rank step (its exact places, its env)
        for k, np_ in enumerate(node_plans):
            shape = JobShape(
                plan=np_.plan, rank_step=True, rank_file=os.path.join(workdir, f"rankexec-{k}.txt")
            )
            write_files(Launch([], {}, "none", files=((shape.rank_file, rank_step_text(shape)),)))
            steps.append(rank_step_argv(shape))

        env = {"TOPOBIND_LAYOUT": args.layout}
        rankfile = None
        if args.launcher == "mpirun":
            path, flavour = find_mpirun(args.mpi)
            version = 5 if flavour == "openmpi5" else 4
            rankfile = (
                os.path.join(workdir, "rankfile"),
                pernode.rankfile_per_node(node_plans, version),
            )
            write_files(Launch([], {}, "none", files=(rankfile,)))
            if os.geteuid() == 0:
                env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

        def launch_of(prog: list[str]) -> Launch:
            step = [st + prog for st in steps]
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


def _check_program(name: str) -> None:
    """The program must exist here, on the batch host, before any rank is started: a launcher
    would report a missing program in its own words, once per rank."""
    import errno

    path = name if "/" in name else shutil.which(name)
    if path is None or not os.path.exists(path):
        raise CannotRun(name, FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT)))
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise CannotRun(name, PermissionError(errno.EACCES, os.strerror(errno.EACCES)))


def _verify_first(
    plan: Plan, program: list[str], args: argparse.Namespace, workdir: str, launch: Launch
) -> int:
    """Run the probe in the program's place; 0 when every thread is where planned."""
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
        print(
            "topobind: error: device variables differ from the plan; verification failed, so "
            "the program is not launched",
            file=sys.stderr,
        )
        return 1
    if not all_ok(rows):
        print(table(rows), file=sys.stderr)
        print(
            "topobind: error: placement differs from the plan; verification failed, so the "
            "program is not launched",
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
    return 0


def _check_samples(plan: Plan, launch: Launch, workdir: str, sample_ms: int) -> bool:
    """Compare the per-rank step's samples of the running program with the plan."""
    expected = plan.nranks * launch.nodes
    deadline = time.monotonic() + sample_ms / 1000 + 12.0
    while time.monotonic() < deadline and len(_sample_files(workdir)) < expected:
        time.sleep(0.05)
    observed = read_samples(_sample_files(workdir))
    planned = [PlannedRank(r.rank, r.places, r.cpus) for r in plan.ranks]
    rows = compare(planned, observed, nnodes=launch.nodes, match_threads=True)
    print(table(rows), file=sys.stderr)
    if all_ok(rows):
        print(
            f"topobind: verify: the program's {len(rows)} threads ran on their planned CPUs "
            f"({sample_ms} ms after start)",
            file=sys.stderr,
        )
        return True
    print(
        "topobind: error: the program ran with a placement that differs from the plan",
        file=sys.stderr,
    )
    return False


def _sample_files(workdir: str) -> list[str]:
    names = [n for n in os.listdir(workdir) if n.startswith("sample-") and n.endswith(".json")]
    return [os.path.join(workdir, n) for n in sorted(names)]


def run_env(args: argparse.Namespace) -> int:
    plan = plan_for_job(args)
    print_warnings(plan, omp_notes(plan) + env_notes(plan))  # per-gpu: per-rank variables
    for k, v in job_env(JobShape(plan=plan)).items():
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
