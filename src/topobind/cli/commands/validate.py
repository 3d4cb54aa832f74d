"""``topobind validate`` (run the ReFrame checks of a site, table of PASS/FAIL) and
``topobind calibrate`` (measure references for a site and write its references.yaml).

The options and the printing; the engine is :mod:`topobind.validation.reframe_runs` (running
ReFrame, reading its report, the table) and :mod:`topobind.validation.calibration` (references
from the sessions). Calibration runs through ReFrame too, so that references are measured by exactly
the code, sizes, launch and binding that validation later compares against them.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from topobind.cli.arguments import count_arg, number_arg
from topobind.errors import TopobindError
from topobind.fsutil import output_dir, output_file
from topobind.validation import metrics, reframe_runs, sites
from topobind.validation.sites import reframe_results_dir
from topobind.validation.verdict import MAX_REPEAT, MAX_THRESHOLD

VALIDATE_EPILOG = """\
examples:
  topobind validate --site local --tags quick        # this machine, against its calibration
  topobind validate --site betzy --partition normal --tags bandwidth
  topobind validate --site local --tags quick --compare   # and each figure vs earlier runs
  topobind validate --site local --judge sanity   # figures and load shown, only sanity fails
  topobind validate --site local -n StreamCheck%layout=compact -S StreamCheck.elements=50M
  topobind validate --site S --partition P --each-node --confirm   # every node, bad ones named
  topobind validate --site S --partition P --each-node --nodelist 'node[1-8]' --drain --apply
  topobind validate --site S --history --since 30d    # each node over time, drifting nodes

Runs 'reframe -C site_configs/reframe_config.py -c reframe_tests --system SITE:PARTITION -t
TAGS -r', one session per partition, then prints one row per figure: check, variant,
metric, measured value, reference, tolerance, PASS/FAIL (and one row for each check that
has no figure: its sanity result). Exit status 1 when anything failed. The site's settings
and the settings its references were calibrated with are passed as -S options.
ReFrame's reports, perflogs and results database stay in results/reframe/ (or --results).
Tags: quick (the short set), full, bandwidth, variability, binding, latency.

--each-node: one ReFrame session, --distribute=all (one copy of each check per node) and
--reruns N-1, so runs are interleaved across nodes; conformance (site check --live) once per
node. Per figure, a node's median over its runs vs the fleet median: SLOW beyond --threshold
(default 5 %) when a sign test agrees; strength = runs, CV, confidence ('weak' under 7 runs
or 95 %). --confirm re-runs SLOW nodes next to a good node (it stops after 3 runs when none
can come out SLOW any more). Fewer than 3 nodes or 3 runs judge nothing: NOT JUDGED; a
--nodelist node down before the run or not in --reports is 'not tested'. Last line: 'bad
nodes: HOSTLIST' (exit 1), or 'bad nodes: none' (exit 0; 4 with NOT JUDGED/not tested). --drain
drains only a node of the partition (and of --nodelist), named literally, bad on a confirmed
verdict (FAIL, SLOW strong or confirmed);
every other bad node gets a 'not drained' line saying why. docs/site-admins.md.
Each SLOW/FAIL row gets a 'cause:' line (throttled, busy, ... from the runs' evidence against
the fleet's; docs/explanation/causes.md). A failure on at least 3 judged nodes and more than
half of them is a 'site problem': one line with its fix, nothing drained, exit 5.
"""

CALIBRATE_EPILOG = """\
examples:
  topobind calibrate --site local                     # the quick set, 3 sessions
  topobind calibrate --site local --repeat 5 -S StreamCheck.elements=50M
  topobind calibrate --site epyc9755 --tags full      # on the EPYC server itself

Runs the checks (default: the quick set) --repeat times as whole ReFrame sessions
(reframe --reruns), so slow drifts and neighbours are sampled between checks too, then
writes site_configs/SITE/references.yaml (atomically): for each figure the median of the
sessions as reference and a tolerance from their spread, every one a limit a bad node can
cross (docs/site-admins.md, "How calibrate sets references"):
  rates (MB/s, GFLOP/s): lower = -max(FLOOR, 3 x (median - min) / median), at most -90 %;
  upper = max(FLOOR, 3 x (max - median) / median), at most max(50 %, FLOOR); latencies the
  same with the sides swapped; FLOOR = --min-tolerance (default 0.10);
  variability (%): pass while value <= min(CAP, max(FLOOR', 2 x the worst session)), CAP
  50 % for max_slowdown, 25 % for cv, 40 % for frac_slower_5pct (FLOOR' 10, 5, 20 %).
A node is busy when other processes used more than 25 % of its CPU time while the checks
ran (local partitions): calibrate warns and records the load; the good side of rates and
latencies is left open and no variability reference is written.
Provenance: kind measured, method calibration, the date, the host and the number of runs.
The -S settings are recorded and reapplied by topobind validate. Nothing is written when a
check fails.
"""


def _repeat(parser: argparse.ArgumentParser | argparse._ArgumentGroup, help: str) -> None:
    """--repeat N (1 to MAX_REPEAT, default 3): --each-node's runs, calibrate's sessions."""
    parser.add_argument(
        "--repeat", type=count_arg("--repeat", 1, MAX_REPEAT), default=3, metavar="N", help=help
    )


def add_subparser(subparsers: Any) -> None:
    val = subparsers.add_parser(
        "validate",
        help="run a site's ReFrame checks; table of measured vs reference, PASS/FAIL",
        description="Run the ReFrame checks of a site and compare every figure with its target.",
        epilog=VALIDATE_EPILOG,
    )
    _common(val)
    val.add_argument(
        "--compare",
        action="store_true",
        help="also show each figure against earlier runs (ReFrame --performance-compare)",
    )
    val.add_argument(
        "--since",
        default="30d",
        metavar="AGE",
        help="with --compare: how far back earlier runs count (e.g. 7d, 12h; default 30d)",
    )
    val.add_argument(
        "--judge",
        choices=("all", "sanity"),
        default="all",
        help="sanity: show every figure against its reference and the load, but fail only "
        "when a check does (sanity: a crash, a wrong binding, an invalid result), not on a "
        "figure outside its reference (make demo's last step); default all",
    )
    each = val.add_argument_group("every node of a Slurm partition (node acceptance)")
    each.add_argument(
        "--each-node",
        action="store_true",
        help="run the checks on every node (idle ones, or --nodelist), interleaved by run; "
        "one row per node; last line 'bad nodes: HOSTLIST'",
    )
    each.add_argument("--nodelist", metavar="HOSTLIST", help="these nodes, e.g. node[1-3,7]")
    _repeat(each, "runs per node (default 3; 7+: strong; fewer than 3 judges nothing)")
    each.add_argument(
        "--confirm",
        action="store_true",
        help="re-run the SLOW nodes (at least 7 runs) interleaved with a good node before "
        "naming them; after 3 runs it stops when none can come out SLOW any more",
    )
    each.add_argument(
        "--threshold",
        type=number_arg("--threshold", 0, MAX_THRESHOLD, "0.05 for 5 %"),
        default=None,
        metavar="F",
        help="a node slower than the fleet median by more than F is an outlier (default: the "
        "site's settings.outlier_threshold, else 0.05)",
    )
    each.add_argument(
        "--drain", action="store_true", help="print the scontrol commands draining bad nodes"
    )
    each.add_argument("--apply", action="store_true", help="with --drain: run them")
    each.add_argument(
        "--reports",
        nargs="+",
        metavar="JSON",
        help="judge these ReFrame report files (of earlier --each-node runs) instead of running",
    )
    val.add_argument(
        "--history",
        action="store_true",
        help="no run: each node's figures over --since (default 30d) from the results "
        "database; a node whose latest session is worse than its own median by more than the "
        "threshold DRIFTs (exit 1)",
    )
    val.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) when a figure has no reference to compare with",
    )
    val.set_defaults(func=run_validate)

    cal = subparsers.add_parser(
        "calibrate",
        help="measure a site's references on this machine and write its references.yaml",
        description="Run a site's checks several times and write references with tolerances.",
        epilog=CALIBRATE_EPILOG,
    )
    _common(cal)
    _repeat(cal, "sessions (default 3)")
    cal.add_argument(
        "--min-tolerance",
        type=number_arg("--min-tolerance", 0, 1, "0.10 for 10 %"),
        default=0.10,
        metavar="F",
        help="smallest tolerance as a fraction of the reference (default 0.10)",
    )
    cal.set_defaults(func=run_calibrate)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--site", metavar="SITE", help="site name (default: the one matching this host)")
    p.add_argument(
        "--partition",
        action="append",
        metavar="P",
        help="partition (repeatable, or 'all'; default: the site's first partition)",
    )
    smoke = "with --each-node also smoke: the quick checks at their smallest size"
    p.add_argument("--tags", "-t", default="quick", metavar="T",
                   help=f"ReFrame tag (default quick); {smoke}")  # fmt: skip
    p.add_argument(
        "--name", "-n", action="append", metavar="PATTERN", help="only checks matching (reframe -n)"
    )
    p.add_argument(
        "-S",
        dest="setvars",
        action="append",
        default=[],
        metavar="[CHECK.]VAR=VAL",
        help="set a check variable (reframe -S), e.g. -S StreamCheck.elements=20M",
    )
    p.add_argument(
        "--exec-policy",
        choices=("async", "serial"),
        default="async",
        help="ReFrame execution policy; concurrency is bounded by each partition's max_jobs",
    )
    p.add_argument(
        "--results",
        metavar="DIR",
        help="ReFrame results directory (default $TOPOBIND_REFRAME_RESULTS, else a checkout's "
        "results/reframe, else reframe/ in the state folder: see topobind --version)",
    )
    p.add_argument(
        "--retries",
        type=count_arg("--retries", 0, MAX_REPEAT),
        default=0,
        metavar="N",
        help="rerun a failed check up to N times (reframe --max-retries; for noisy nodes)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="show ReFrame's whole output")
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress lines (for cron); without it: a live line per node and check on a "
        "terminal, one line per finished check otherwise",
    )
    p.add_argument(
        "--metrics",
        metavar="FILE",
        help="write the verdicts (per node, per figure against its reference or, with "
        "--each-node, the fleet median) in the Prometheus text format to FILE (*.prom, "
        "atomically) for node_exporter's textfile collector",
    )


# --------------------------------------------------------------------------- validate
def _load(site_name: str | None) -> Any:
    return sites.load_site(site_name) if site_name else sites.detect_site()


def _results_dir(args: argparse.Namespace, write: bool = True) -> Path:
    """--results DIR (or the default); a DIR ReFrame writes to is checked first (the one
    rule of every output: :func:`topobind.fsutil.output_dir`)."""
    if args.results is None:
        return reframe_results_dir()
    if write or args.results in ("", "-"):
        output_dir(args.results, "--results")
    return Path(args.results).resolve()


def _print_compare(got: Any) -> None:
    print(f"\ncompared with earlier runs: {got.spec}")
    print(
        "\n".join(got.table)
        if got.table
        else "(no earlier runs of these checks in the results database)"
    )
    if got.error is not None:
        print(f"topobind: warning: --performance-compare failed: {got.error}")


def run_validate(args: argparse.Namespace) -> int:
    if not args.each_node:
        given = {"--nodelist": args.nodelist is not None, "--confirm": args.confirm,
                 "--drain": args.drain, "--reports": args.reports is not None,
                 "--threshold": args.threshold is not None and not args.history}  # fmt: skip
        used = [o for o, v in given.items() if v]
        if used:
            raise TopobindError(f"{', '.join(used)}: only with --each-node"
                                + (" (or --history for --threshold)" if "--threshold" in used
                                   else ""))  # fmt: skip
    if args.apply and not args.drain:
        raise TopobindError("--apply runs the drain commands: add --drain")
    site = _load(args.site)
    _results_dir(args, write=not args.history)  # --results checked before any run
    if args.history:
        return _run_history(args, site)
    if args.each_node:
        return _run_each_node(args, site)
    if args.metrics is not None:
        metrics.check_path(args.metrics)  # before the run, not after it
    for line in reframe_runs.warnings_before(site):
        print(f"topobind: warning: {line}", file=sys.stderr)
    options = reframe_runs.Options(
        results=_results_dir(args), tags=args.tags, names=args.name, setvars=args.setvars,
        exec_policy=args.exec_policy, verbose=args.verbose, retries=args.retries,
        judge=args.judge, compare=args.compare, since=args.since, strict=args.strict,
        quiet=args.quiet,
    )  # fmt: skip
    partitions = reframe_runs.partitions_of(site, args.partition)

    def show(one: reframe_runs.PartitionResult) -> None:
        _print_partition(site, one, options)

    out = reframe_runs.validate(site, partitions, options, show)
    rows = out.rows
    bad = reframe_runs.failed(rows)
    passed = sum(1 for r in rows if r.result.startswith("PASS"))
    outside = sum(1 for r in rows if r.result == reframe_runs.OUTSIDE)
    print(
        f"\n{passed} passed, {len(bad)} failed, "
        f"{sum(1 for r in rows if r.result == 'SKIP')} skipped"
        + (f", {outside} outside their reference (not judged: --judge sanity)" if outside else "")
    )
    _print_reference_count(rows, args.strict)
    if args.metrics is not None:
        text = out.metrics_text(site.name, partitions)
        print(f"metrics: {metrics.write(args.metrics, text)}")
    sys.stdout.write(out.not_judged_text(site.name))  # the last line, when nothing compared
    return out.status


def _print_partition(site: Any, one: Any, options: Any) -> None:
    """One partition's table and lines, as soon as its session is done."""
    for line in one.warnings:
        print(f"topobind: warning: {line}", file=sys.stderr)
    if one.session is None or one.session.parsed is None:
        for line in one.errors:
            print(f"topobind: error: {line}", file=sys.stderr)
        return
    rows = one.rows
    print(f"\nsite {site.name}, partition {one.partition} (tags {options.tags}):")
    print(reframe_runs.table(rows) + "\n")
    _print_load(one.load, options.judge)
    if site.calibration is not None and site.calibration.busy:
        print(
            f"(busy): the reference was {site.calibration.busy_text()}: it describes the "
            "node under that load (no variability reference was written); calibrate "
            f"again on a quiet node: topobind calibrate --site {site.name}\n"
        )
    for r in reframe_runs.failed(rows):
        print(f"FAIL {r.check} {r.variant} {r.metric}: {r.reason}")
    for r in rows:
        if r.result == reframe_runs.OUTSIDE:
            print(f"outside {r.check} {r.variant} {r.metric}: {r.reason} (not judged)")
    for r in rows:
        if r.result == "SKIP":
            print(f"skip {r.check} {r.variant}: {r.reason}")
    print(f"report: {one.session.report_path}")
    print(f"perflogs: {options.results / 'perflogs' / site.name / one.partition}")
    for line in one.errors:
        print(f"topobind: error: {line}", file=sys.stderr)
    if one.comparison is not None:
        _print_compare(one.comparison)


def _print_reference_count(rows: list[Any], strict: bool) -> int:
    """'K of N figures compared with a reference'; returns N - K."""
    compared, total = reframe_runs.reference_count(rows)
    print(f"{compared} of {total} figures compared with a reference")
    if total > compared:
        hint = "(--strict: that fails)" if strict else "(--strict makes that a failure)"
        print(
            f"topobind: warning: {total - compared} figure(s) had no reference {hint}; "
            "write references with: topobind calibrate",
            file=sys.stderr,
        )
    return total - compared


def _run_each_node(args: argparse.Namespace, site: Any) -> int:
    from topobind.validation import acceptance, reframe_runs

    parts = reframe_runs.partitions_of(site, args.partition)
    if len(parts) != 1:
        raise TopobindError("--each-node tests one partition's nodes: name it with --partition")
    threshold = _threshold(args, site)
    req = acceptance.Request(
        partition=parts[0],
        tags=args.tags,
        names=args.name,
        setvars=reframe_runs.setvars_for(site, args.setvars, calibrating=False, each_node=True),
        nodelist=args.nodelist,
        repeat=args.repeat,
        confirm=args.confirm,
        threshold=threshold,
        quiet=args.quiet,
    )
    if args.metrics is not None:
        metrics.check_path(args.metrics)  # before the run, not after it
    if args.reports:
        if args.confirm:
            raise TopobindError("--confirm runs the checks again: not with --reports")
        states = acceptance.partition_states(site, req.partition) if args.drain else None
        out = acceptance.judge_reports(args.reports, site, req, states)
        what = f"{len(args.reports)} report file(s)"
    else:
        _expected(args, site, req)
        out = acceptance.accept(site, req, _results_dir(args), args.verbose)
        what = f"{req.repeat} runs (tags {req.tags})"
    for line in acceptance.outcome_lines(out, site.name, threshold, what):
        print(line)
    print("reports: " + acceptance.reports_text(out.reports))
    status = _drain(out, args.apply) if args.drain else 0
    if args.metrics is not None:
        text = acceptance.metrics_text(out, site.name, req.partition)
        print(f"metrics: {metrics.write(args.metrics, text)}")
    if not args.reports:
        print(f"{out.jobs} Slurm job(s) for {len(out.nodes)} node(s)")
    print(acceptance.bad_nodes_line(out.verdicts, out.obs.site_problems))
    return acceptance.exit_status(out, status)


def _expected(args: argparse.Namespace, site: Any, req: Any) -> None:
    """Print the expected run time (timed by the last --each-node run of this partition);
    a plan over the site's per-node budget (settings.node_budget) is refused after it."""
    from topobind.validation import acceptance, node_jobs, progress

    states = acceptance.partition_states(site, req.partition) or {}
    nodes = len(acceptance.choose_nodes(states, req.nodelist, req.partition)) if states else 1
    exp = node_jobs.expected(site, req, nodes, _results_dir(args), node_jobs.site_wave(site, nodes))
    print(exp.text, flush=True)
    progress.check_budget(site, exp)


def _threshold(args: argparse.Namespace, site: Any) -> float:
    from topobind.validation import verdict

    return verdict.threshold_for(args.threshold, site.settings, str(site.path), args.each_node)


def _run_history(args: argparse.Namespace, site: Any) -> int:
    from topobind.validation import history

    days = history.days_of(args.since)
    threshold = _threshold(args, site)
    db = _results_dir(args, write=False) / "results.db"
    rows = history.trends(history.sessions(db, site.name, days), site.name, threshold)
    print(f"site {site.name}: {db}, last {args.since}; drift: latest session more than "
          f"{100 * threshold:g}% worse than the node's own median before it")  # fmt: skip
    if not rows:
        print("(no node has figures from two sessions yet)")
        return 0
    print(history.table(rows))
    drifting = sorted({t.node for t in rows if t.drift})
    print(f"drifting nodes: {hostlist_text(drifting)}")
    return 1 if drifting else 0


def hostlist_text(nodes: list[str]) -> str:
    from topobind.topo import hostlist

    return hostlist.shown(nodes) if nodes else "none"


def _drain(out: Any, apply: bool) -> int:
    """Print (and with --apply run) the drain of each node that may be drained; one line for
    each bad node that may not, and what Slurm shows after each drain."""
    from topobind.validation import acceptance, slurm

    plan = acceptance.drain_lines(out)
    for line in plan.refused:
        print(line)
    status = 0
    for node, reason in plan.commands:
        if not apply:
            print(shlex.join(slurm.drain_command(node, reason)))
            continue
        (done,) = acceptance.drain(acceptance.DrainPlan([(node, reason)], []))
        if done.ok:
            print(f"drained {node}: {done.text}")
        else:
            print(f"topobind: error: drain {node}: {done.text}", file=sys.stderr)
            status = 1
    if plan.commands and not apply:
        print("(dry run: add --apply to drain them)")
    return status


def _print_load(load: Any, judge: str) -> None:
    """What other processes did to this machine while the session measured it."""
    if load is None:
        return
    print(f"load: {load.text()}")
    if load.busy and judge == "all":
        print("(a figure measured on a busy node may fail for the load alone)")
    print()


def run_calibrate(args: argparse.Namespace) -> int:
    if args.metrics is not None:
        raise TopobindError("--metrics writes verdicts: use it with validate")
    if args.retries:
        raise TopobindError(
            "calibrate does not retry failed checks (a reference needs every session); "
            "drop --retries"
        )
    site = _load(args.site)
    if site.references_path is not None:  # written after the whole calibration: checked now
        output_file(site.references_path, "references file", "make the site directory writable",
                    made=True)  # fmt: skip
    options = reframe_runs.CalibrateOptions(
        results=_results_dir(args), tags=args.tags, names=args.name, setvars=args.setvars,
        exec_policy=args.exec_policy, verbose=args.verbose, quiet=args.quiet,
        repeat=args.repeat, min_tolerance=args.min_tolerance,
    )  # fmt: skip
    out = reframe_runs.calibrate(site, reframe_runs.partitions_of(site, args.partition), options)
    if out.failed:
        print(reframe_runs.table(out.rows))
        for r in out.failed:
            print(f"FAIL {r.check} {r.variant} {r.metric}: {r.reason}")
        print(
            f"topobind: error: {len(out.failed)} check(s) failed; nothing written to "
            f"{site.references_path} (fix them, or leave them out with --name)",
            file=sys.stderr,
        )
        return out.status
    _print_calibration(site, out)
    return out.status


def _print_calibration(site: Any, out: reframe_runs.Calibrated) -> None:
    """The references written: one line per figure, and the load they were measured under."""
    cal, load = out.run, out.load
    print(f"\nsite {site.name}, partition {out.partition}: {cal.runs} sessions")
    if load is not None:
        print(f"load: {load.text()}")
    print(f"{'figure':<42} {'reference':>14} {'tolerance':>12}  runs (min .. max)")
    for (check, variant, metric), d in cal.derived().items():
        vals = cal.values[(check, variant, metric)]
        unit = sites.CHECKS[check].metrics[metric].unit
        if d is None:
            ref_text, tol_text = "not written", "(busy node)"
        else:
            ref_text = reframe_runs.fmt(d.reference) + " " + unit
            tol_text = sites.tolerance_text(d.lower, d.upper)
        print(
            f"{check + '.' + variant + '.' + metric:<42} {ref_text:>14} {tol_text:>12}  "
            f"{len(vals)} ({reframe_runs.fmt(min(vals))} .. {reframe_runs.fmt(max(vals))})"
        )
    print(f"wrote {out.written}")
    if cal.busy and load is not None:
        print(
            f"topobind: warning: busy node: {load.text()}; the references describe the node "
            "under that load (rates got no upper bound, latencies no lower one, variability "
            f"no reference); calibrate again on a quiet node: {cal.command}",
            file=sys.stderr,
        )
