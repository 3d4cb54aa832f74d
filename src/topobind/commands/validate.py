"""``topobind validate`` (run the ReFrame checks of a site, table of PASS/FAIL) and
``topobind calibrate`` (measure references for a site and write its references.yaml).

Both run ReFrame with ``site_configs/reframe_config.py`` (the configuration derived from the
site files) on ``reframe_tests/``, and read ReFrame's JSON run report. Calibration runs
through ReFrame too, so that references are measured by exactly the code, sizes, launch and
binding that validation later compares against them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError

VALIDATE_EPILOG = """\
examples:
  topobind validate --site local --tags quick        # this machine, against its calibration
  topobind validate --site betzy --partition normal --tags bandwidth
  topobind validate --site local --tags quick --compare   # and each figure vs earlier runs
  topobind validate --site local -n StreamCheck%layout=compact -S StreamCheck.elements=50M

Runs 'reframe -C site_configs/reframe_config.py -c reframe_tests --system SITE:PARTITION -t
TAGS -r', one session per partition, then prints one row per figure: check, variant,
metric, measured value, reference, tolerance, PASS/FAIL (and one row for each check that
has no figure: its sanity result). Exit status 1 when anything failed. The site's settings
and the settings its references were calibrated with are passed as -S options.
ReFrame's reports, perflogs and results database stay in results/reframe/ (or --results).
Tags: quick (the short set), full, bandwidth, variability, binding, latency.
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


def add_subparser(subparsers: Any) -> None:
    val = subparsers.add_parser(
        "validate",
        help="run a site's ReFrame checks; table of measured vs reference, PASS/FAIL",
        description="Run the ReFrame checks of a site and compare every figure with its target.",
        epilog=VALIDATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    val.set_defaults(func=run_validate)

    cal = subparsers.add_parser(
        "calibrate",
        help="measure a site's references on this machine and write its references.yaml",
        description="Run a site's checks several times and write references with tolerances.",
        epilog=CALIBRATE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(cal)
    cal.add_argument("--repeat", type=int, default=3, metavar="N", help="sessions (default 3)")
    cal.add_argument(
        "--min-tolerance",
        type=float,
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
    p.add_argument("--tags", "-t", default="quick", metavar="T", help="ReFrame tag (default quick)")
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
        help="ReFrame results directory (default results/reframe, or $TOPOBIND_REFRAME_RESULTS)",
    )
    p.add_argument(
        "--retries",
        type=int,
        default=0,
        metavar="N",
        help="rerun a failed check up to N times (reframe --max-retries; for noisy nodes)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="show ReFrame's whole output")


# --------------------------------------------------------------------------- running ReFrame
def reframe_exe() -> list[str]:
    exe = Path(sys.executable).parent / "reframe"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("reframe")
    if found:
        return [found]
    raise TopobindError(
        "ReFrame is not installed; install it into the venv: pip install 'reframe-hpc==4.10.4' "
        "(or pip install -e '.[reframe]')"
    )


def _utc_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


@dataclass
class Session:
    partition: str
    returncode: int
    report_path: Path
    log_path: Path
    report: dict[str, Any] | None = None
    testcases: list[dict[str, Any]] = field(default_factory=list)
    skip_reasons: dict[str, str] = field(default_factory=dict)  # test hash -> reason
    errors: list[str] = field(default_factory=list)  # ReFrame's ERROR lines
    final: list[dict[str, Any]] = field(default_factory=list)  # last attempt of each case


def _parse_setvar(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise TopobindError(f"-S {text!r}: write it as [CHECK.]VAR=VALUE, e.g. -S elements=20M")
    k, v = text.split("=", 1)
    if not re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*\.)?[a-z_][a-z0-9_]*", k):
        raise TopobindError(f"-S {text!r}: {k!r} is not a [CHECK.]variable name")
    return k, v


def _setvars(site: Any, user: list[str], calibrating: bool) -> dict[str, str]:
    merged = {k: str(v) for k, v in (site.settings if calibrating else site.all_settings).items()}
    for text in user:
        k, v = _parse_setvar(text)
        merged[k] = v
    for k, v in merged.items():
        if isinstance(v, bool) or v in ("True", "False"):
            merged[k] = v.lower()
    if calibrating:
        merged["calibrating"] = "true"
    return merged


def _partitions(site: Any, requested: list[str] | None) -> list[str]:
    if not requested:
        return [site.partitions[0].name]
    if "all" in requested:
        return [p.name for p in site.partitions]
    for name in requested:
        site.partition(name)  # raises with the list of partitions
    return requested


_STATUS_LINE = re.compile(r"^\[\s*(OK|FAIL|SKIP|PASSED|FAILED|ABORT\w*|XFAIL|XPASS)\s*\]")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# [     SKIP ] ( 4/17) NodeCheck /68d43045 @local:default+builtin [site local describes no node]
_SKIP_LINE = re.compile(r"^\[\s*SKIP\s*\].*? /([0-9a-f]{8}) @\S+ \[(.*)\]\s*$")


def run_reframe(
    site: Any,
    partition: str,
    tags: str,
    names: list[str] | None,
    setvars: dict[str, str],
    exec_policy: str,
    results: Path,
    verbose: bool,
    extra: list[str] | None = None,
    label: str = "validate",
) -> Session:
    from topobind.sites import REPO

    stamp = _utc_stamp()
    report = results / "reports" / f"{label}-{site.name}-{partition}-{stamp}.json"
    log = results / "logs" / f"{label}-{site.name}-{partition}-{stamp}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [
        *reframe_exe(),
        "-C",
        str(REPO / "site_configs" / "reframe_config.py"),
        "-c",
        str(REPO / "reframe_tests"),
        "--system",
        f"{site.name}:{partition}",
        "-t",
        tags,
        "--exec-policy",
        exec_policy,
        "--report-file",
        str(report),
        "--nocolor",
    ]
    for n in names or []:
        argv += ["-n", n]
    for k, v in setvars.items():
        argv += ["-S", f"{k}={v}"]
    argv += [*(extra or []), "-r"]
    env = dict(os.environ)
    env["TOPOBIND_REFRAME_RESULTS"] = str(results)
    env.setdefault("TOPOBIND_ROOT", str(REPO))
    print(f"topobind: {shlex.join(argv)}", file=sys.stderr)
    skips: dict[str, str] = {}
    errors: list[str] = []
    with open(log, "w", encoding="utf-8") as logfh:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            logfh.write(line)
            plain = _ANSI.sub("", line)
            skipped = _SKIP_LINE.match(plain)
            if skipped:
                skips[skipped.group(1)] = skipped.group(2)
            if plain.startswith("ERROR"):
                errors.append(" ".join(plain.split()))
            noise = "variables were not set" in plain  # site settings other checks lack
            if (
                verbose
                or _STATUS_LINE.match(plain)
                or (plain.startswith(("ERROR", "WARNING")) and not noise)
            ):
                sys.stderr.write(plain)
                sys.stderr.flush()
        rc = proc.wait()
    session = Session(partition, rc, report, log, skip_reasons=skips, errors=errors)
    if report.exists():
        import json

        session.report = json.loads(report.read_text())
        runs = session.report.get("runs", [])
        session.testcases = [tc for run in runs for tc in run.get("testcases", [])]
        # the last attempt of every test case (after --max-retries), in first-run order
        last: dict[str, dict[str, Any]] = {}
        for tc in session.testcases:
            last[f"{tc.get('name')}@{tc.get('system')}:{tc.get('partition')}"] = tc
        session.final = list(last.values())
    return session


# --------------------------------------------------------------------------- report table
@dataclass(frozen=True)
class Row:
    check: str
    variant: str
    metric: str
    measured: str
    reference: str
    tolerance: str
    result: str
    reason: str = ""


def _variant(tc: dict[str, Any]) -> str:
    parts = tc.get("name", "").split(" %")[1:]
    return ",".join(p.split("=", 1)[1] for p in parts if "=" in p) or "-"


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def rows_from(
    testcases: list[dict[str, Any]],
    skips: dict[str, str] | None = None,
    errors: list[str] | None = None,
) -> list[Row]:
    from topobind.sites import tolerance_text

    rows: list[Row] = []
    for tc in testcases:
        check = tc.get("name", "?").split(" %")[0]
        variant = _variant(tc)
        result = str(tc.get("result", "?"))
        reason = " ".join(str(tc.get("fail_reason") or "").split())
        if result not in ("pass", "fail", "skip"):  # aborted: the session stopped early
            why = reason or "; ".join(errors or []) or f"ReFrame result {result!r}"
            rows.append(Row(check, variant, "-", "-", "-", "-", "ABORT", why))
            continue
        if result == "skip":
            reason = (skips or {}).get(str(tc.get("hashcode")), reason)
            rows.append(Row(check, variant, "-", "-", "-", "-", "SKIP", reason))
            continue
        perf = tc.get("perfvalues") or {}
        figures = [(k.split(":")[-1], v) for k, v in perf.items() if v and v[0] is not None]
        if result == "fail" and tc.get("fail_phase") != "performance":
            rows.append(Row(check, variant, "sanity", "-", "-", "-", "FAIL", reason))
            continue
        if not figures:
            rows.append(
                Row(check, variant, "sanity", "-", "-", "-", "PASS" if result == "pass" else
                    result.upper(), reason)
            )  # fmt: skip
            continue
        for metric, (val, ref, lower, upper, unit, *res) in figures:
            has_ref = not (ref == 0 and lower is None and upper is None)
            verdict = (res[0] if res else None) or ("pass" if result == "pass" else result)
            if not has_ref:
                verdict_text = "PASS (no ref)" if verdict == "pass" else verdict.upper()
            else:
                verdict_text = verdict.upper()
            why = ""
            if verdict == "fail":
                lo = "-inf" if lower is None else _fmt(ref * (1 + lower))
                hi = "+inf" if upper is None else _fmt(ref * (1 + upper))
                why = f"{_fmt(val)} {unit} is outside {lo} .. {hi} {unit}"
            rows.append(
                Row(
                    check,
                    variant,
                    metric,
                    f"{_fmt(val)} {unit}",
                    f"{_fmt(ref)} {unit}" if has_ref else "-",
                    tolerance_text(lower, upper) if has_ref else "-",
                    verdict_text,
                    why,
                )
            )
    return rows


def table(rows: list[Row]) -> str:
    head = ("check", "variant", "metric", "measured", "reference", "tolerance", "result")
    data = [head] + [
        (r.check, r.variant, r.metric, r.measured, r.reference, r.tolerance, r.result) for r in rows
    ]
    widths = [max(len(str(row[i])) for row in data) for i in range(len(head))]
    right = {3, 4}
    lines = []
    for n, row in enumerate(data):
        cells = [
            str(c).rjust(widths[i]) if i in right else str(c).ljust(widths[i])
            for i, c in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def mark_busy(rows: list[Row], site: Any) -> list[Row]:
    """Rows whose reference was calibrated on a busy node get ' (busy)' after it."""
    from dataclasses import replace

    from topobind.calibration import figure_key

    if site.calibration is None or not site.calibration.busy:
        return rows
    out = []
    for r in rows:
        key = figure_key(r.check, r.variant, r.metric)
        target = site.targets.get(key) if key else None
        if target is not None and r.reference != "-" and target.provenance.method == "calibration":
            r = replace(r, reference=f"{r.reference} (busy)")
        out.append(r)
    return out


def _failed(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.result not in ("PASS", "PASS (no ref)", "SKIP")]


# --------------------------------------------------------------------------- validate
def _load(site_name: str | None) -> Any:
    from topobind import sites

    return sites.load_site(site_name) if site_name else sites.detect_site()


def _results_dir(args: argparse.Namespace) -> Path:
    from topobind.sites import reframe_results_dir

    return Path(args.results).resolve() if args.results else reframe_results_dir()


def _compare(site: Any, session: Session, since: str, results: Path) -> None:
    from topobind.sites import REPO

    if not session.report:
        return
    info = session.report["session_info"]
    start = dt.datetime.fromtimestamp(float(info["time_start_unix"]), dt.UTC)
    m = re.fullmatch(r"(\d+)([mhdw])", since)
    if not m:
        raise TopobindError(f"--since {since!r}: write it as a number and m/h/d/w, e.g. 30d")
    unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
    begin = start - dt.timedelta(**{unit: int(m.group(1))})
    end = start - dt.timedelta(seconds=1)
    fmt = "%Y%m%dT%H%M%S%z"
    spec = f"{info['uuid']}/{begin.strftime(fmt)}:{end.strftime(fmt)}/median:/name,pvar,pval,punit"
    argv = [
        *reframe_exe(),
        "-C",
        str(REPO / "site_configs" / "reframe_config.py"),
        "--system",
        f"{site.name}:{session.partition}",
        "--nocolor",
        "--table-format",
        "plain",
        "--term-lhs",
        "this run",
        "--term-rhs",
        f"previous {since}",
        "--performance-compare",
        spec,
    ]
    env = dict(os.environ, TOPOBIND_REFRAME_RESULTS=str(results))
    print(f"\ncompared with earlier runs: {shlex.join(argv[-2:])}")
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    # drop ReFrame's banner; keep the table
    start_idx = next((i for i, ln in enumerate(lines) if ln.startswith("name ")), None)
    if start_idx is None:
        print("(no earlier runs of these checks in the results database)")
    else:
        print("\n".join(lines[start_idx:]))
    if done.returncode != 0:
        print(f"topobind: warning: --performance-compare failed: {done.stderr.strip()[-300:]}")


def run_validate(args: argparse.Namespace) -> int:
    site = _load(args.site)
    results = _results_dir(args)
    setvars = _setvars(site, args.setvars, calibrating=False)
    host = socket.gethostname()
    if site.calibration and site.calibration.host != host:
        print(
            f"topobind: warning: the references of site {site.name} were measured on "
            f"{site.calibration.host}, this is {host}",
            file=sys.stderr,
        )
    if not site.targets:
        print(
            f"topobind: warning: site {site.name} has no targets yet: figures are shown without "
            f"references (write them with: topobind calibrate --site {site.name})",
            file=sys.stderr,
        )
    all_rows: list[Row] = []
    failed_sessions = 0
    for partition in _partitions(site, args.partition):
        retry = ["--max-retries", str(args.retries)] if args.retries > 0 else []
        session = run_reframe(
            site,
            partition,
            args.tags,
            args.name,
            setvars,
            args.exec_policy,
            results,
            args.verbose,
            extra=retry,
        )
        if session.report is None and session.returncode == 0:
            print(
                f"topobind: warning: no check matched on {site.name}:{partition} (tags "
                f"{args.tags!r}{', names ' + ', '.join(args.name) if args.name else ''})",
                file=sys.stderr,
            )
            failed_sessions += 1
            continue
        if session.report is None:
            failed_sessions += 1
            tail = session.log_path.read_text(errors="replace").strip().splitlines()[-3:]
            print(
                f"topobind: error: ReFrame wrote no report for {site.name}:{partition} (exit "
                f"{session.returncode}); its log {session.log_path} ends with: " + " | ".join(tail),
                file=sys.stderr,
            )
            continue
        rows = rows_from(session.final, session.skip_reasons, session.errors)
        if not rows:
            print(
                f"topobind: warning: no check matched tags {args.tags!r} on "
                f"{site.name}:{partition}",
                file=sys.stderr,
            )
        rows = mark_busy(rows, site)
        print(f"\nsite {site.name}, partition {partition} (tags {args.tags}):")
        print(table(rows) + "\n")
        if site.calibration is not None and site.calibration.busy:
            print(
                f"(busy): the reference was {site.calibration.busy_text()}: it describes the "
                "node under that load (no variability reference was written); calibrate "
                f"again on a quiet node: topobind calibrate --site {site.name}\n"
            )
        for r in _failed(rows):
            print(f"FAIL {r.check} {r.variant} {r.metric}: {r.reason}")
        skipped = [r for r in rows if r.result == "SKIP"]
        for r in skipped:
            print(f"skip {r.check} {r.variant}: {r.reason}")
        print(f"report: {session.report_path}")
        print(f"perflogs: {results / 'perflogs' / site.name / partition}")
        if session.returncode != 0 and not _failed(rows):
            failed_sessions += 1
            print(f"topobind: error: ReFrame exited with {session.returncode}", file=sys.stderr)
        if args.compare:
            _compare(site, session, args.since, results)
        all_rows += rows
    bad = _failed(all_rows)
    passed = sum(1 for r in all_rows if r.result.startswith("PASS"))
    print(
        f"\n{passed} passed, {len(bad)} failed, "
        f"{sum(1 for r in all_rows if r.result == 'SKIP')} skipped"
    )
    return 1 if bad or failed_sessions else 0


def run_calibrate(args: argparse.Namespace) -> int:
    from topobind import calibration, sites
    from topobind.fsutil import atomic_write_text

    if args.retries:
        raise TopobindError(
            "calibrate does not retry failed checks (a reference needs every session); "
            "drop --retries"
        )
    if args.repeat < 1:
        raise TopobindError(f"--repeat must be at least 1 (got {args.repeat})")
    if not 0 <= args.min_tolerance <= 1.0:
        raise TopobindError(f"--min-tolerance must be within [0, 1] (got {args.min_tolerance})")
    site = _load(args.site)
    if site.references_path is None:
        raise TopobindError(
            f"{site.path}: has no 'references:' key, so calibrate has nowhere to write; add "
            "references: references.yaml"
        )
    partitions = _partitions(site, args.partition)
    if len(partitions) != 1:
        raise TopobindError("calibrate measures one partition; name it with --partition P")
    results = _results_dir(args)
    setvars = _setvars(site, args.setvars, calibrating=True)
    extra = ["--reruns", str(args.repeat - 1)] if args.repeat > 1 else []
    here = site.partition(partitions[0]).scheduler == "local"
    before = calibration.cpu_sample() if here else None
    session = run_reframe(
        site,
        partitions[0],
        args.tags,
        args.name,
        setvars,
        args.exec_policy,
        results,
        args.verbose,
        extra=extra,
        label="calibrate",
    )
    load = calibration.load_between(before, calibration.cpu_sample() if here else None)
    if session.report is None:
        raise TopobindError(
            f"ReFrame wrote no report (exit {session.returncode}); see {session.log_path}"
        )
    rows = rows_from(session.testcases, session.skip_reasons, session.errors)
    bad = _failed(rows)
    if bad:
        print(table(rows))
        for r in bad:
            print(f"FAIL {r.check} {r.variant} {r.metric}: {r.reason}")
        print(
            f"topobind: error: {len(bad)} check(s) failed; nothing written to "
            f"{site.references_path} (fix them, or leave them out with --name)",
            file=sys.stderr,
        )
        return 1
    values = calibration.collect(session.testcases)
    if not values:
        raise TopobindError(f"no figures measured with tags {args.tags!r}; nothing to write")
    command = "topobind calibrate " + shlex.join(
        [f"--site={site.name}", f"--partition={partitions[0]}", f"--tags={args.tags}",
         f"--repeat={args.repeat}", *[f"-S{s}" for s in args.setvars]]
    )  # fmt: skip
    cal = calibration.CalibrationRun(
        site=site,
        values=values,
        runs=args.repeat,
        floor=args.min_tolerance,
        partition=partitions[0],
        tags=args.tags,
        settings=setvars,
        node=calibration.record_node(site, partitions[0], calibration.node_from(session.testcases)),
        command=command,
        load=load,
    )
    text = calibration.references_yaml(cal)
    # Check what we are about to write with the same rules a reader applies.
    import yaml

    problems = sites.schema_problems(yaml.safe_load(text), str(site.references_path), "references")
    if problems:
        raise TopobindError("internal: calibrate produced an invalid file: " + problems[0])
    atomic_write_text(site.references_path, text)
    print(f"\nsite {site.name}, partition {partitions[0]}: {args.repeat} sessions")
    if load is not None:
        print(f"load: {load.text()}")
    print(f"{'figure':<42} {'reference':>14} {'tolerance':>12}  runs (min .. max)")
    for (check, variant, metric), d in cal.derived().items():
        vals = values[(check, variant, metric)]
        unit = sites.CHECKS[check].metrics[metric].unit
        if d is None:
            ref_text, tol_text = "not written", "(busy node)"
        else:
            ref_text, tol_text = _fmt(d.reference) + " " + unit, sites.tolerance_text(
                d.lower, d.upper)  # fmt: skip
        print(
            f"{check + '.' + variant + '.' + metric:<42} {ref_text:>14} {tol_text:>12}  "
            f"{len(vals)} ({_fmt(min(vals))} .. {_fmt(max(vals))})"
        )
    print(f"wrote {site.references_path}")
    if cal.busy and load is not None:
        print(
            f"topobind: warning: busy node: {load.text()}; the references describe the node "
            "under that load (rates got no upper bound, latencies no lower one, variability "
            f"no reference); calibrate again on a quiet node: {command}",
            file=sys.stderr,
        )
    return 0
