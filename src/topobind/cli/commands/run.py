"""``topobind run``, ``topobind verify`` (per-rank step: rankstep/rankexec.c; ``topobind env`` is
:mod:`topobind.cli.commands.env`)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import textwrap
from typing import Any

from topobind import jsonfmt
from topobind.cli.arguments import count_arg
from topobind.cli.commands.common import (
    add_layout_args,
    add_topology_arg,
    plan_from,
    print_warnings,
    request_from,
)
from topobind.errors import TopobindError, VerifyFailed, plural
from topobind.fsutil import output_file
from topobind.launch import mpi_launchers as launchers
from topobind.launch import run as jobrun
from topobind.launch.mpi_launchers.base import Launch
from topobind.launch.node_groups import job_topology
from topobind.launch.shape import NodePlan, RunOptions
from topobind.launch.verify import all_ok, rows_json, table
from topobind.launch.verify_devices import env_table, why_variables_only
from topobind.plan.layouts import per_domain_names
from topobind.plan.memory import check_here
from topobind.plan.model import Plan, read_plan_file
from topobind.plan.request import PlanRequest
from topobind.topo.allocation import MAX_NODES
from topobind.topo.topology import Topology, load

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
    "through the per-rank step rankstep/bin/rankexec (C, no interpreter), which exports the "
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
each host's ranks, in rank order, are compared with the plan's ranks 0, 1, ... In a Slurm job
whose nodes hold different shares (tasks or CPUs), each group of equal nodes gets a plan of
its own, as in topobind run, and each node's ranks (in node order) are compared with it.
Exit status:
0 when every rank and thread is bound to its planned CPU, 1 otherwise, 127/126 when the
launch command cannot be started.
"""


def _dash_values(parser: argparse.ArgumentParser, flags: tuple[str, ...]) -> None:
    """Let ``flags`` take a value that starts with a dash as a separate word (``--srun-args
    '--cpu-bind=none'``), which argparse takes for an unknown option: such a pair is given
    to it as ``FLAG=VALUE``. Words after ``--`` (the program's) are left as they are."""
    parse = parser.parse_known_args

    def joined(args: Any = None, namespace: Any = None) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        out: list[str] = []
        i = 0
        while i < len(words):
            word = words[i]
            if word == "--":
                out += words[i:]
                break
            value = words[i + 1] if i + 1 < len(words) else ""
            if word in flags and value.startswith("-") and value != "--":
                out.append(f"{word}={value}")
                i += 2
                continue
            out.append(word)
            i += 1
        return parse(out, namespace)

    parser.parse_known_args = joined  # type: ignore[method-assign]


def add_subparser(subparsers: Any) -> None:
    run = subparsers.add_parser(
        "run",
        help="launch a program with the planned binding (srun, mpirun or none)",
        description="Plan for this job's allocation, export OMP_*, and launch the program.",
        epilog=RUN_EPILOG,
    )
    _plan_args(run)
    run.add_argument("--launcher", type=_launcher_arg, metavar="NAME", help=launchers.help_text())
    run.add_argument(
        "--mpi", choices=launchers.OPENMPI, help="with --launcher mpirun: which OpenMPI"
    )
    for flag, launcher, example in (
        ("--srun-args", "srun", "--mpi=pmix --time=5"),
        ("--mpirun-args", "mpirun / mpiexec", "--mca btl self,vader"),
    ):  # the launcher's own options, one shell-quoted string
        run.add_argument(
            flag,
            type=shlex.split,
            default=[],
            metavar="'OPTS'",
            help=f"options for {launcher} itself, e.g. {flag} '{example}'",
        )
    _dash_values(run, ("--srun-args", "--mpirun-args"))
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
        help="the per-rank step (rankstep/bin/rankexec): only where the launcher's binding "
        "does not give the exact places (auto), always, or never",
    )
    run.add_argument("--dry-run", action="store_true", help="print the command, do not run")
    run.add_argument(
        "--plan-json",
        metavar="FILE",
        help="also write the plan it launches to FILE (as topobind plan --format json; "
        "atomically), e.g. for a check that compares placement with it: one start-up fewer "
        "than a separate topobind plan",
    )
    run.add_argument(
        "--evidence",
        action="store_true",
        help="collect each rank's evidence (the node's signals: other processes, steal, cgroup "
        "throttling, faults, NUMA, interrupts; the program's counters) with rankstep/bin/"
        "tb-evidence around it, and print one line about it on stderr",
    )
    run.add_argument(
        "--evidence-json",
        metavar="FILE",
        help="with --evidence: also write every rank's evidence document to FILE (atomically)",
    )
    run.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    run.set_defaults(func=run_program)

    verify = subparsers.add_parser(
        "verify",
        help="run the placement probe under a launch command and compare with the plan",
        description="Run kernels/bin/whereami under LAUNCH COMMAND; table of planned vs actual.",
        epilog=VERIFY_EPILOG,
    )
    _plan_args(verify)
    verify.add_argument("--plan", metavar="FILE", help="a plan JSON (topobind plan -f json)")
    verify.add_argument("--format", "-f", choices=("text", "json"), default="text")
    verify.add_argument(
        "--nodes",
        "-N",  # srun's spelling
        type=count_arg("--nodes", 1, MAX_NODES),
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


def _launcher_arg(text: str) -> str:
    """``--launcher NAME``: a registered launcher or alias (a close name is suggested)."""
    if text not in launchers.names():
        raise argparse.ArgumentTypeError(launchers.unknown("launcher", text, launchers.names()))
    return text


def _options(args: argparse.Namespace, req: PlanRequest) -> RunOptions:
    return RunOptions(
        args.launcher,
        args.mpi,
        args.rank_step,
        args.sample_ms,
        tuple(args.srun_args),
        tuple(args.mpirun_args),
        req.allocation,
    )


def _print_launch(launch: Launch) -> None:
    for k, v in launch.env.items():
        print(f"export {k}={shlex.quote(v)}")
    print(shlex.join(launch.argv))


def _dry_run(
    plan: Plan,
    program: list[str],
    args: argparse.Namespace,
    groups: list[NodePlan],
    opts: RunOptions,
) -> int:
    """Print the exact command. Files the command refers to (step file, rankfile) go to a
    new directory under $TMPDIR, kept and named only when the command needs them (every
    node reads the job's shared one for groups of nodes); nothing is written to the working
    directory (see :func:`topobind.launch.run.dry_job`)."""
    job = jobrun.dry_job(plan, program, opts, sample=args.verify_running,
                         groups=groups)  # fmt: skip
    if groups:
        print("# the job's nodes hold different shares: one plan per group of nodes")
        for g in groups:
            print(f"#   {g.about}")
    else:
        print_warnings(plan, job.launch.notes)
    _print_sampling(args, job.workdir)
    _print_launch(job.launch)
    _print_files(job.launch)
    if job.launch.files or groups:
        print(f"# files this command reads (kept; remove when done): {job.workdir}")
    return 0


def _print_files(launch: Launch) -> None:
    """The files the dry run's command reads, each after a comment naming it."""
    for path, text in launch.files:
        print(f"# {os.path.basename(path)} ({path}):\n" + text, end="")


def _print_sampling(args: argparse.Namespace, workdir: str) -> None:
    """With --verify-running, what the dry run's command does and does not do."""
    if args.verify_running:
        print(
            f"# --verify-running: every rank's step samples where its threads run "
            f"{args.sample_ms} ms after start-up, into {workdir}; only 'topobind run' "
            "compares the samples with the plan"
        )


def _exited(launch: Launch, status: int, program: str | None = None) -> None:
    """A failed launch told on stderr, naming the program when no launcher stands between
    (the status is the program's own)."""
    if status:
        what = program if launch.launcher == "none" and program else launch.argv[0]
        print(f"topobind: {what} exited with status {status}", file=sys.stderr)


class _Printed:
    """The stages of :func:`topobind.launch.run.run_job` as this command prints them."""

    def __init__(self, plan: Plan | None, short: bool = False) -> None:
        self.plan, self.short = plan, short  # plan: None for groups (warned before)

    def prepared(self, job: jobrun.Job) -> None:
        if self.plan is not None:
            print_warnings(self.plan, job.launch.notes)

    def probed(self, verdict: jobrun.Verdict) -> None:
        _print_verdict(verdict, short=self.short)


def run_program(args: argparse.Namespace) -> int:
    program = _strip_dashes(args.program)
    if not program:
        raise TopobindError("no program given; put it after '--', e.g. topobind run -- ./a.out")
    if args.sample_ms < 0 or args.sample_ms > 600_000:
        raise TopobindError(f"--sample-ms must be 0 .. 600000 (got {args.sample_ms})")
    if args.plan_json is not None:  # before any work: '' and a FIFO refused, not replaced
        output_file(args.plan_json, "--plan-json")
    _check_evidence_args(args)
    req = request_from(args, job=True)  # once, for the node groups and the plan
    topo = job_topology(req, load(req.topology))  # once, for both; the job's CPUs (Flux)
    groups = _node_groups(args, req, topo) or []  # the nodes differ: a plan per group of nodes
    for g in groups:
        print_warnings(g.plan)
    plan = groups[0].plan if groups else plan_from(args, topo, job=True, req=req)
    if not groups and (not args.dry_run or plan.topology.source == "live"):
        check_here(plan, program[0])  # NUMA nodes here and allowed; the shim reaches the program
    if args.plan_json is not None:
        _write_plan_json(args.plan_json, plan, len(groups))
    if args.dry_run:
        return _dry_run(plan, program, args, groups, _options(args, req))
    done = jobrun.run_job(
        plan, program, _options(args, req), _Printed(None if groups else plan, short=bool(groups)),
        verify=args.verify, verify_running=args.verify_running, groups=groups,
        evidence=args.evidence,
    )  # fmt: skip
    _exited(done.job.launch, done.status, None if groups else program[0])
    _print_evidence(done, args)
    return _with_samples(done, args)


def _check_evidence_args(args: argparse.Namespace) -> None:
    if args.evidence_json is not None and not args.evidence:
        raise TopobindError("--evidence-json FILE needs --evidence")
    if args.evidence and args.dry_run:
        raise TopobindError("--evidence gathers what the ranks write while they run: drop "
                            "--dry-run (or --evidence)")  # fmt: skip
    if args.evidence:
        from topobind.measure.programs import find_kernel

        find_kernel("tb-evidence")  # before the launch: one line with the fix when missing
    if args.evidence_json is not None:
        output_file(args.evidence_json, "--evidence-json")


def _print_evidence(done: jobrun.Outcome, args: argparse.Namespace) -> None:
    """With --evidence: one line on stderr; every rank's document into --evidence-json."""
    if done.evidence is None:
        return
    from topobind.measure.evidence import ranks_line

    ranks = [(f"{r.host} rank {r.rank}", r.evidence, r.reason) for r in done.evidence]
    print(ranks_line(ranks), file=sys.stderr)
    if args.evidence_json is not None:
        from topobind.fsutil import atomic_write_text

        doc = {"schema": "topobind.run-evidence/1", "status": done.status,
               "ranks": [r.document for r in done.evidence]}  # fmt: skip
        try:
            atomic_write_text(args.evidence_json, jsonfmt.dumps(doc) + "\n")
        except OSError as exc:
            raise TopobindError(f"--evidence-json {args.evidence_json}: cannot write it "
                                f"({exc.strerror}); give a writable path") from None  # fmt: skip


def _write_plan_json(path: str, plan: Any, groups: int) -> None:
    """The plan launched, as ``topobind plan --format json`` prints it, written atomically;
    refused (before the launch) when the job's nodes differ: no one plan describes them."""
    from topobind.emit import launch_dict
    from topobind.fsutil import atomic_write_text

    if groups > 1:
        raise TopobindError(f"--plan-json {path}: the job's nodes differ ({groups} plans, "
                            "one a group of nodes); run topobind plan on each node")  # fmt: skip
    output_file(path, "--plan-json")  # again: the plan took time
    try:
        atomic_write_text(path, jsonfmt.dumps(plan.to_dict(launch_dict(plan))) + "\n")
    except OSError as exc:
        raise TopobindError(f"--plan-json {path}: cannot write it ({exc.strerror}); give a "
                            "writable path") from None  # fmt: skip


def _print_verdict(verdict: jobrun.Verdict, short: bool = False) -> None:
    """The probe's verdict on stderr; :class:`VerifyFailed` when the placement differs."""
    failed = "not launching" if short else "verification failed, so the program is not launched"
    _print_state()
    _print_probe_memory(verdict, failed)
    if not all(r.ok for r in verdict.env_rows):
        print(env_table(verdict.env_rows, why_variables_only()), file=sys.stderr)
        raise VerifyFailed(
            f"device variables or the GPUs a runtime saw differ from the plan; {failed}"
        )
    if not all_ok(verdict.rows):
        print(table(verdict.rows), file=sys.stderr)
        raise VerifyFailed(f"placement differs from the plan; {failed}")
    from topobind.topo.hostlist import shown

    hosts = {r.observed.host for r in verdict.rows if r.observed}
    on = f", on {len(hosts)} nodes: {shown(hosts)}" if len(hosts) > 1 else ""
    print(
        f"topobind: verify: all {len(verdict.rows)} threads on their planned CPUs, bound to "
        f"them{on}",
        file=sys.stderr,
    )
    if verdict.env_rows:  # per-gpu: the variables and what each rank's GPU runtime saw
        print(env_table(verdict.env_rows, why_variables_only()), file=sys.stderr)


def _with_samples(done: jobrun.Outcome, args: argparse.Namespace) -> int:
    """The running program's sampled placement and memory, printed; the outcome's status.
    A launch stopped by Ctrl-C or SIGTERM (status 130, 143: already said) is not verified."""
    if done.rows is not None and done.samples is not None:
        _print_samples(done.rows, args.sample_ms)
        _print_memory(done.memory)
    return done.exit_status


def _print_probe_memory(verdict: jobrun.Verdict, failed: str) -> None:
    """The probe's memory policy and test page per rank; VerifyFailed when they differ."""
    from topobind.launch.verify_memory import probe_table

    if not verdict.memory_rows:
        return
    print(probe_table(verdict.memory_rows), file=sys.stderr)
    if not all(r.ok for r in verdict.memory_rows):
        raise VerifyFailed(f"memory policy differs from the plan; {failed}")


def _print_state() -> None:
    """The kernel's memory settings (numa_balancing, THP, zone reclaim, hugepage pools) on
    stderr: what may undo the planned memory placement."""
    from topobind.topo.memory_state import read_state, state_lines

    for line in state_lines(read_state()):
        print(f"topobind: {line}", file=sys.stderr)


def _print_memory(rows: list[Any] | None) -> None:
    """The running program's memory against each rank's planned memory, and the kernel
    settings that decide it, on stderr (None: no memory planned; empty: no sample)."""
    from topobind.launch import verify_memory as memverify

    if rows == []:  # no program was running at its sample: the placement verdict says so
        return
    _print_state()
    if rows is None:
        return
    print(memverify.table(rows), file=sys.stderr)
    word = "verify" if all(r.ok for r in rows) else "error"
    print(f"topobind: {word}: {memverify.summary(rows)}", file=sys.stderr)


def _print_samples(rows: list[Any], sample_ms: int) -> bool:
    """The running program's sampled placement on stderr; True when it is as planned."""
    print(table(rows), file=sys.stderr)
    unused = sum(1 for r in rows if r.status == "UNUSED")
    if all_ok(rows):
        print(
            f"topobind: verify: the program's {plural(len(rows) - unused, 'thread')} ran on "
            f"their planned CPUs ({sample_ms} ms after start)",
            file=sys.stderr,
        )
        if unused:
            print(
                "topobind: note: the program ran fewer threads than planned: "
                f"{plural(unused, 'planned thread')} never ran (see UNUSED above)",
                file=sys.stderr,
            )
        return True
    if all(r.status == "MISSING" for r in rows):
        print(
            "topobind: error: nothing observed: no rank's program was running at its sample "
            "(each row says why); sample earlier (--sample-ms) or check with --verify",
            file=sys.stderr,
        )
        return False
    print(
        "topobind: error: the program ran with a placement that differs from the plan",
        file=sys.stderr,
    )
    return False


def _node_groups(
    args: argparse.Namespace, req: PlanRequest, topo: Topology
) -> list[NodePlan] | None:
    """Plans per group of the job's nodes (None: one plan fits every node)."""
    return jobrun.node_groups(req, getattr(args, "launcher", None), topo)


def run_verify(args: argparse.Namespace) -> int:
    command = _strip_dashes(args.command)
    if not command:
        raise TopobindError("no launch command given; put it after '--' (e.g. -- srun -n 2)")
    if args.nodes is not None and args.nodes < 1:
        raise TopobindError(f"--nodes must be at least 1 (got {args.nodes})")
    req = None if args.plan else request_from(args, job=True)  # once, groups and plan
    topo = None if req is None else job_topology(req, load(req.topology))  # once, for both
    groups = None if req is None or topo is None else _node_groups(args, req, topo)
    if groups is not None and args.nodes is not None:
        raise TopobindError(
            "--nodes does not apply when the job's nodes hold different shares (each group "
            "of nodes is compared with its own plan); leave it out, or give --plan FILE"
        )
    plan = None if req is None or groups is not None else plan_from(args, topo, job=True, req=req)
    for p in [plan] if plan is not None else [g.plan for g in groups or ()]:
        print_warnings(p)
    planned = read_plan_file(args.plan) if args.plan else []
    alloc = req.allocation if req is not None else None
    done = jobrun.verify_command(command, plan, planned, groups, args.nodes, alloc)
    if done.status:
        print(f"topobind: error: the launch command exited with {done.status}", file=sys.stderr)
        return done.status
    return _print_verify(done, args.format)


def _print_verify(done: jobrun.Checked, fmt: str) -> int:
    """``topobind verify``'s table (or JSON) on stdout; its exit status."""
    from topobind.topo.memory_state import read_state, state_json, state_lines

    state = read_state()
    if fmt == "json":
        doc = {"ok": done.ok, "rows": rows_json(done.rows), "memory_state": state_json(state)}
        if done.memory:
            from topobind.launch.verify_memory import probe_json

            doc["memory"] = probe_json(done.memory)
        if done.env_rows:
            doc["device_env"] = [dataclasses.asdict(r) | {"ok": r.ok} for r in done.env_rows]
        print(jsonfmt.dumps(doc))
    else:
        print(table(done.rows))
        if done.env_rows:
            print(env_table(done.env_rows, why_variables_only()))
        if done.memory:
            from topobind.launch.verify_memory import probe_table

            print(probe_table(done.memory))
        print("\n".join(state_lines(state)))
    return 0 if done.ok else 1
