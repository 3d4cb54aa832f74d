"""Running a site's ReFrame checks and reading what they measured: the ``reframe`` command
line of ``topobind validate`` and ``topobind calibrate`` (``site_configs/reframe_config.py``
on ``reframe_tests/``), ReFrame's JSON run report, one :class:`Row` per figure, the table, and
ReFrame's comparison with earlier runs (``--performance-compare``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from topobind.errors import Interrupted, TopobindError
from topobind.interrupt import signals_held, stop_on_signals
from topobind.validation.calibration import figure_key
from topobind.validation.reframe_report import Report, TestCase, cases_of
from topobind.validation.sites import REPO, Site, tolerance_text
from topobind.validation.verdict import NOT_JUDGED_STATUS


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
    report: dict[str, Any] | None = None  # the decoded JSON
    parsed: Report | None = None  # the same, read by topobind.validation.reframe_report
    testcases: list[TestCase] = field(default_factory=list)
    skip_reasons: dict[str, str] = field(default_factory=dict)  # test hash -> reason
    errors: list[str] = field(default_factory=list)  # ReFrame's ERROR lines
    final: list[TestCase] = field(default_factory=list)  # last attempt of each case


def _parse_setvar(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise TopobindError(f"-S {text!r}: write it as [CHECK.]VAR=VALUE, e.g. -S elements=20M")
    k, v = text.split("=", 1)
    if not re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*\.)?[a-z_][a-z0-9_]*", k):
        raise TopobindError(f"-S {text!r}: {k!r} is not a [CHECK.]variable name")
    return k, v


#: a site setting under this prefix applies to ``validate --each-node`` only, in place of the
#: same setting without it (the per-node acceptance compares nodes with each other, several runs
#: each, and may bound a check tighter than a CI run measuring a figure against its reference)
EACH_NODE = "each_node."


def setvars_for(site: Site, user: list[str], calibrating: bool,
                each_node: bool = False) -> dict[str, str]:  # fmt: skip
    """ReFrame ``-S`` variables: the site's settings (with the references' own), those under
    :data:`EACH_NODE` over them for ``each_node``, then the user's ``-S``."""
    ours = site.settings if calibrating else site.all_settings
    merged = {k: str(v) for k, v in ours.items() if not k.startswith(EACH_NODE)}
    if each_node:
        merged |= {k[len(EACH_NODE) :]: str(v) for k, v in ours.items() if k.startswith(EACH_NODE)}
    for text in user:
        k, v = _parse_setvar(text)
        merged[k] = v
    for k, v in merged.items():
        if isinstance(v, bool) or v in ("True", "False"):
            merged[k] = v.lower()
    if calibrating:
        merged["calibrating"] = "true"
    return merged


def partitions_of(site: Site, requested: list[str] | None) -> list[str]:
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


def skip_reason(line: str) -> tuple[str, str] | None:
    """(test hash, reason) of one of ReFrame's SKIP status lines; None for any other line."""
    m = _SKIP_LINE.match(_ANSI.sub("", line))
    return (m.group(1), m.group(2)) if m else None


def run_reframe(
    site: Site,
    partition: str,
    tags: str,
    names: list[str] | None,
    setvars: dict[str, str],
    exec_policy: str,
    results: Path,
    verbose: bool,
    extra: list[str] | None = None,
    label: str = "validate",
    echo: Callable[[str], None] | None = None,
    progress: Any = None,
    env_defaults: dict[str, str] | None = None,
) -> Session:
    """One ReFrame session on ``site:partition``; ReFrame's status lines (all of its output
    when ``verbose``) go to ``echo`` as they come, the command line first; with ``progress``
    (a :class:`topobind.validation.progress.ReframeTracker`) the status lines become progress;
    ``env_defaults``: environment variables set for ReFrame unless already set."""
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
    env["TOPOBIND_SITE"] = site.name  # the checks' targets: this site, whatever was exported
    # calibrating: the checks must not reapply the settings of the previous calibration
    env["TOPOBIND_CALIBRATING"] = "1" if setvars.get("calibrating") == "true" else "0"
    env.setdefault("TOPOBIND_ROOT", str(REPO))
    for k, v in (env_defaults or {}).items():  # ReFrame settings a caller tunes; the user's win
        env.setdefault(k, v)
    say = echo or _stderr
    say(f"topobind: {shlex.join(argv)}\n")
    skips: dict[str, str] = {}
    errors: list[str] = []
    warned: dict[str, int] = {}
    with open(log, "w", encoding="utf-8") as logfh:
        proc: subprocess.Popen[str] | None = None
        try:
            with stop_on_signals(f"while ReFrame ran on {site.name}:{partition}"):
                with signals_held():  # a Ctrl-C as ReFrame starts acts once proc is known
                    proc = subprocess.Popen(
                        argv,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        errors="replace",
                        env=env,
                    )
                assert proc.stdout is not None
                for line in proc.stdout:
                    logfh.write(line)
                    plain = _ANSI.sub("", line)
                    skipped = skip_reason(plain)
                    if skipped:
                        skips[skipped[0]] = skipped[1]
                    if plain.startswith("ERROR"):
                        errors.append(" ".join(plain.split()))
                    if progress is not None and not verbose and progress.feed(plain):
                        continue  # a status line: shown as progress (validation/progress.py)
                    if _shown(plain, verbose, label) and _first_time(plain, warned, verbose):
                        say(plain)
                rc = proc.wait()
        except Interrupted as exc:
            signum = exc.exit_status - 128
            done = stop_reframe(proc, logfh) if proc else "ReFrame had not started"
            during = f"while ReFrame ran on {site.name}:{partition}; {done} (its log: {log})"
            raise Interrupted(signum, signal.Signals(signum).name, during) from None
    session = Session(partition, rc, report, log, skip_reasons=skips, errors=errors)
    if report.exists():
        from topobind.validation import reframe_report

        session.parsed = reframe_report.read_report(str(report))
        session.report = json.loads(report.read_text())
        session.testcases = list(session.parsed.cases)
        session.final = session.parsed.final()
    return session


def _shown(plain: str, verbose: bool, label: str) -> bool:
    """Whether a line of ReFrame's output is echoed: all with --verbose, else status lines,
    errors and warnings (not the noise of site settings other checks lack, nor, for
    --each-node, the missing references it does not use)."""
    noise = "variables were not set" in plain
    noise = noise or (label in ("each-node", "confirm") and "no reference for" in plain)
    return (
        verbose
        or bool(_STATUS_LINE.match(plain))
        or (plain.startswith(("ERROR", "WARNING")) and not noise)
    )


def _first_time(plain: str, warned: dict[str, int], verbose: bool) -> bool:
    """Whether a warning of ReFrame's output is shown: the first time its text (less the
    test's name: 'WARNING: StreamCheck %layout=compact ...: the cap of ...') is seen in the
    session; the same warning of the other checks and runs (18 a pass) is counted, not shown."""
    if verbose or not plain.startswith("WARNING: "):
        return True
    text = plain.removeprefix("WARNING: ")
    name, sep, rest = text.partition(": ")
    key = rest if sep and _DISPLAY_NAME.match(name) else text
    warned[key] = warned.get(key, 0) + 1
    return warned[key] == 1


_DISPLAY_NAME = re.compile(r"^[A-Za-z_]\w*( %\S+=\S*)*$")


STOP_GRACE_S = 60  # ReFrame cancels its jobs (scancel) on SIGINT; give it time to


def stop_reframe(proc: subprocess.Popen[str], logfh: Any) -> str:
    """Stop the ``reframe`` child after Ctrl-C: SIGINT (ReFrame then cancels its jobs), then
    SIGTERM and SIGKILL if it lingers; further Ctrl-C are ignored meanwhile. What it did, in
    words."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=STOP_GRACE_S)
            logfh.write(out or "")
            return "ReFrame stopped and cancelled its jobs"
        except subprocess.TimeoutExpired:
            proc.terminate()
        try:
            proc.wait(timeout=10)
            return f"ReFrame did not stop within {STOP_GRACE_S} s and was terminated"
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return "ReFrame did not stop and was killed (check squeue for its jobs)"
    finally:
        for s, h in old.items():
            signal.signal(s, h)


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
    node: str = ""  # where it ran (ReFrame's job_nodelist)


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.1f}"
    return f"{value:.3g}"


def rows_from(
    testcases: list[TestCase] | list[dict[str, Any]],
    skips: dict[str, str] | None = None,
    errors: list[str] | None = None,
) -> list[Row]:
    """One row per figure of each test case (one for a check without figures), with the
    node it ran on (:mod:`topobind.validation.reframe_report` says where)."""
    rows: list[Row] = []
    for tc in cases_of(testcases):
        rows += [replace(r, node=tc.node) for r in _rows_of(tc, skips, errors)]
    return rows


def reference_count(rows: list[Row]) -> tuple[int, int]:
    """(figures compared with a reference, figures)."""
    figures = [r for r in rows if r.metric not in ("-", "sanity")]
    return sum(1 for r in figures if r.reference != "-"), len(figures)


def _rows_of(tc: TestCase, skips: dict[str, str] | None, errors: list[str] | None) -> list[Row]:
    check, variant, result, reason = tc.check, tc.variant, tc.result, tc.fail_reason
    if result not in ("pass", "fail", "skip"):  # aborted: the session stopped early
        why = reason or "; ".join(errors or []) or f"ReFrame result {result!r}"
        return [Row(check, variant, "-", "-", "-", "-", "ABORT", why)]
    if result == "skip":
        reason = (skips or {}).get(tc.hashcode, reason)
        return [Row(check, variant, "-", "-", "-", "-", "SKIP", reason)]
    if result == "fail" and tc.fail_phase != "performance":
        return [Row(check, variant, "sanity", "-", "-", "-", "FAIL", reason)]
    if not tc.figures:
        verdict = "PASS" if result == "pass" else result.upper()
        return [Row(check, variant, "sanity", "-", "-", "-", verdict, reason)]
    rows: list[Row] = []
    for f in tc.figures:
        verdict = f.result or ("pass" if result == "pass" else result)
        has_ref = f.has_reference
        text = "PASS (no ref)" if verdict == "pass" and not has_ref else verdict.upper()
        why = ""
        if verdict == "fail":
            lo, hi = f.limits()
            lo_text = "-inf" if lo is None else fmt(lo)
            hi_text = "+inf" if hi is None else fmt(hi)
            why = f"{fmt(f.value)} {f.unit} is outside {lo_text} .. {hi_text} {f.unit}"
        rows.append(
            Row(check, variant, f.metric, f"{fmt(f.value)} {f.unit}",
                f"{fmt(f.reference)} {f.unit}" if has_ref else "-",
                tolerance_text(f.lower, f.upper) if has_ref else "-", text, why)
        )  # fmt: skip
    return rows


def table(rows: list[Row]) -> str:
    head: tuple[str, ...] = ("check", "variant", "metric", "measured", "reference", "tolerance",
                             "result")  # fmt: skip
    data: list[tuple[str, ...]] = [head] + [
        (r.check, r.variant, r.metric, r.measured, r.reference, r.tolerance, r.result) for r in rows
    ]
    right = {3, 4}
    if any(r.node for r in rows):  # where each check ran (a Slurm partition)
        nodes = ["node"] + [r.node or "-" for r in rows]
        data = [(n, *d) for n, d in zip(nodes, data, strict=True)]
        right = {4, 5}
    widths = [max(len(str(row[i])) for row in data) for i in range(len(data[0]))]
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


def mark_busy(rows: list[Row], site: Site) -> list[Row]:
    """Rows whose reference was calibrated on a busy node get ' (busy)' after it."""

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


OUTSIDE = "OUTSIDE"  # a figure outside its reference, not judged (validate --judge sanity)


def not_judged(rows: list[Row]) -> list[Row]:
    """Figures outside their reference become OUTSIDE (shown, not failed); a sanity failure,
    an aborted check or a check without figures stays as it is."""
    return [
        replace(r, result=OUTSIDE) if r.result == "FAIL" and r.metric != "sanity" else r
        for r in rows
    ]


def failed(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.result not in ("PASS", "PASS (no ref)", "SKIP", OUTSIDE)]


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


@dataclass(frozen=True)
class Comparison:
    spec: str  # the --performance-compare argument
    table: list[str]  # ReFrame's table (empty: no earlier runs)
    error: str | None  # why ReFrame's comparison failed


#: seconds ReFrame's --performance-compare may take (it reads the results database)
COMPARE_TIMEOUT = 600


def compare(site: Site, session: Session, since: str, results: Path) -> Comparison | None:
    """ReFrame's comparison of a session's figures with the median of earlier runs."""
    if not session.report:
        return None
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
    try:  # a results database ReFrame cannot read in 10 minutes: no comparison, said
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=env,
                              timeout=COMPARE_TIMEOUT)  # fmt: skip
    except subprocess.TimeoutExpired:
        return Comparison(shlex.join(argv[-2:]), [], f"no answer in {COMPARE_TIMEOUT} s")
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    # drop ReFrame's banner; keep the table
    start_idx = next((i for i, ln in enumerate(lines) if ln.startswith("name ")), None)
    return Comparison(
        shlex.join(argv[-2:]),
        [] if start_idx is None else lines[start_idx:],
        None if done.returncode == 0 else done.stderr.strip()[-300:],
    )


# --------------------------------------------------------------------------- one validate
@dataclass(frozen=True)
class SessionOptions:
    """The ReFrame session options ``validate`` and ``calibrate`` share."""

    results: Path
    tags: str = "quick"
    names: list[str] | None = None
    setvars: list[str] = field(default_factory=list)  # -S [CHECK.]VAR=VALUE
    exec_policy: str = "async"
    verbose: bool = False
    quiet: bool = False  # no progress lines (validation/progress.py)


@dataclass(frozen=True)
class Options(SessionOptions):
    """What ``topobind validate`` (one machine or a partition's jobs) was asked to run."""

    retries: int = 0
    judge: str = "all"  # all | sanity (a figure outside its reference is shown, not failed)
    compare: bool = False
    since: str = "30d"
    strict: bool = False  # a figure without a reference fails


@dataclass
class PartitionResult:
    partition: str
    rows: list[Row]
    session: Session | None
    load: Any = None  # load.Load while a local session ran
    warnings: list[str] = field(default_factory=list)  # stderr lines after 'topobind: warning: '
    errors: list[str] = field(default_factory=list)  # stderr lines after 'topobind: error: '
    comparison: Comparison | None = None
    failed: bool = False  # the session itself failed (no report, ReFrame's own error)


@dataclass
class Outcome:
    partitions: list[PartitionResult]
    strict: bool = False

    @property
    def rows(self) -> list[Row]:
        return [r for p in self.partitions for r in p.rows]

    @property
    def unreferenced(self) -> int:
        compared, total = reference_count(self.rows)
        return total - compared

    def metrics_text(self, site: str, partitions: list[str]) -> str:
        """The run's verdicts in the Prometheus text format (:func:`metrics.from_validate`:
        the final test cases of every session; a case without a node ran on this one)."""
        import socket

        from topobind.validation import metrics

        cases = [tc for p in self.partitions if p.session is not None
                 for tc in p.session.final]  # fmt: skip
        nodes, figures = metrics.from_validate(cases, socket.gethostname())
        return metrics.render(nodes, figures, site=site, partition=",".join(partitions))

    @property
    def nothing_compared(self) -> bool:
        """Figures were measured and none met a reference: performance was not judged."""
        compared, total = reference_count(self.rows)
        return total > 0 and compared == 0

    def not_judged_text(self, site: str) -> str:
        """validate's last line when figures were measured and none was compared (a site
        before calibrate; not when the run failed anyway), else ''."""
        if not self.nothing_compared or self.status == 1:
            return ""
        total = reference_count(self.rows)[1]
        return (f"performance NOT JUDGED: none of the {total} figure(s) had a reference; "
                f"write references with: topobind calibrate --site {site}\n")  # fmt: skip

    @property
    def status(self) -> int:
        """1 when a check failed, a session failed, or (--strict) a figure had no reference;
        else NOT_JUDGED_STATUS (4) when no figure met a reference (no pass); else 0 (some
        figures without a reference are a warning)."""
        bad = failed(self.rows) or any(p.failed for p in self.partitions)
        if bad or (self.strict and self.unreferenced):
            return 1
        return NOT_JUDGED_STATUS if self.nothing_compared else 0


def warnings_before(site: Site, host: str | None = None) -> list[str]:
    """What to say before running: references of another host (``host``: default, this
    one), a site without targets."""
    import socket

    host = host if host is not None else socket.gethostname()
    out = []
    if site.calibration and site.calibration.host != host:
        out.append(f"the references of site {site.name} were measured on "
                   f"{site.calibration.host}, this is {host}")  # fmt: skip
    if not site.targets:
        out.append(f"site {site.name} has no targets yet: figures are shown without references "
                   f"(write them with: topobind calibrate --site {site.name})")  # fmt: skip
    return out


def validate(
    site: Site,
    partitions: list[str],
    options: Options,
    on_partition: Callable[[PartitionResult], None] | None = None,
) -> Outcome:
    """One ReFrame session per partition, its rows judged; ``on_partition`` sees each
    partition's result as soon as it is known (the command prints it then)."""
    setvars = setvars_for(site, options.setvars, calibrating=False)
    if options.judge == "sanity":  # a figure outside its reference neither fails nor reruns
        setvars.setdefault("strict_check", "false")
    out = Outcome([], options.strict)
    for partition in partitions:
        one = _validate_partition(site, partition, setvars, options)
        out.partitions.append(one)
        if on_partition is not None:
            on_partition(one)
    return out


def _validate_partition(site: Site, partition: str, setvars: dict[str, str],
                        options: Options) -> PartitionResult:  # fmt: skip
    from topobind.validation import load as cpu_load

    here = site.partition(partition).scheduler == "local"
    before = cpu_load.cpu_sample() if here else None
    retry = ["--max-retries", str(options.retries)] if options.retries > 0 else []
    from topobind.validation import progress

    times = progress.check_times(options.results, site.name, partition)
    tracker = progress.ReframeTracker(progress.make(quiet=options.quiet, estimates=times))
    try:
        session = run_reframe(
            site, partition, options.tags, options.names, setvars, options.exec_policy,
            options.results, options.verbose, extra=retry, progress=tracker,
        )  # fmt: skip
    finally:
        tracker.progress.close()  # and its heartbeat
    load = cpu_load.load_between(before, cpu_load.cpu_sample() if before else None)
    where = f"{site.name}:{partition}"
    if session.parsed is None:
        if session.returncode == 0:
            names = f", names {', '.join(options.names)}" if options.names else ""
            why = f"no check matched on {where} (tags {options.tags!r}{names})"
            return PartitionResult(partition, [], session, load, warnings=[why], failed=True)
        tail = session.log_path.read_text(errors="replace").strip().splitlines()[-3:]
        why = (f"ReFrame wrote no report for {where} (exit {session.returncode}); its log "
               f"{session.log_path} ends with: " + " | ".join(tail))  # fmt: skip
        return PartitionResult(partition, [], session, load, errors=[why], failed=True)
    rows = rows_from(session.final, session.skip_reasons, session.errors)
    one = PartitionResult(partition, rows, session, load)
    if not rows:
        one.warnings.append(f"no check matched tags {options.tags!r} on {where}")
    one.rows = mark_busy(one.rows, site)
    if options.judge == "sanity":
        one.rows = not_judged(one.rows)
    if here:  # this machine: no node column
        one.rows = [replace(r, node="") for r in one.rows]
    if session.returncode != 0 and not failed(one.rows):
        one.failed = True
        one.errors.append(f"ReFrame exited with {session.returncode}")
    if options.compare:
        one.comparison = compare(site, session, options.since, options.results)
    return one


# --------------------------------------------------------------------------- one calibrate
@dataclass(frozen=True)
class CalibrateOptions(SessionOptions):
    """What ``topobind calibrate`` was asked to measure: the session options, then the
    sessions and the tolerance floor."""

    repeat: int = 3
    min_tolerance: float = 0.10


@dataclass
class Calibrated:
    """One calibration: its rows, and the references written (``run``, ``written``) unless a
    check failed (``failed``: nothing written); ``load`` while a local session ran."""

    partition: str
    rows: list[Row]
    failed: list[Row]
    run: Any = None  # calibration.CalibrationRun
    written: Path | None = None
    load: Any = None

    @property
    def status(self) -> int:
        return 1 if self.failed else 0


def calibrate(site: Site, partitions: list[str], options: CalibrateOptions) -> Calibrated:
    """One ReFrame session of ``options.repeat`` runs on the one partition, its figures made
    references (:mod:`topobind.validation.calibration`), checked against the references schema
    and written atomically to the site's references file, unless a check failed."""
    from topobind.validation import calibration
    from topobind.validation import load as cpu_load

    _check_calibration(site, partitions, options)
    part = partitions[0]
    setvars = setvars_for(site, options.setvars, calibrating=True)
    extra = ["--reruns", str(options.repeat - 1)] if options.repeat > 1 else []
    here = site.partition(part).scheduler == "local"
    before = cpu_load.cpu_sample() if here else None
    session = _tracked(site, part, options, setvars, extra)
    load = cpu_load.load_between(before, cpu_load.cpu_sample() if here else None)
    if session.report is None:
        raise TopobindError(
            f"ReFrame wrote no report (exit {session.returncode}); see {session.log_path}"
        )
    rows = rows_from(session.testcases, session.skip_reasons, session.errors)
    if failed(rows):
        return Calibrated(part, rows, failed(rows), load=load)
    values = calibration.collect(session.testcases)
    if not values:
        raise TopobindError(f"no figures measured with tags {options.tags!r}; nothing to write")
    command = "topobind calibrate " + shlex.join(
        [f"--site={site.name}", f"--partition={part}", f"--tags={options.tags}",
         f"--repeat={options.repeat}", *[f"-S{s}" for s in options.setvars]]
    )  # fmt: skip
    node = calibration.record_node(site, part, calibration.node_from(session.testcases))
    run = calibration.CalibrationRun(
        site=site, values=values, runs=options.repeat, floor=options.min_tolerance,
        partition=part, tags=options.tags, settings=setvars, node=node, command=command,
        load=load,
    )  # fmt: skip
    return Calibrated(part, rows, [], run, calibration.write_references(run), load)


def _check_calibration(site: Site, partitions: list[str], options: CalibrateOptions) -> None:
    """Refuse, in one line, what calibrate cannot do before any session runs."""
    if options.repeat < 1:
        raise TopobindError(f"--repeat must be at least 1 (got {options.repeat})")
    if not 0 <= options.min_tolerance <= 1.0:
        raise TopobindError(f"--min-tolerance must be within [0, 1] (got {options.min_tolerance})")
    if site.references_path is None:
        raise TopobindError(
            f"{site.path}: has no 'references:' key, so calibrate has nowhere to write; add "
            "references: references.yaml"
        )
    if len(partitions) != 1:
        raise TopobindError("calibrate measures one partition; name it with --partition P")


def _tracked(site: Site, partition: str, options: CalibrateOptions, setvars: dict[str, str],
             extra: list[str]) -> Session:  # fmt: skip
    """One calibrate session, its status lines shown as progress."""
    from topobind.validation import progress

    times = progress.check_times(options.results, site.name, partition)
    tracker = progress.ReframeTracker(progress.make(quiet=options.quiet, estimates=times))
    try:
        return run_reframe(
            site, partition, options.tags, options.names, setvars, options.exec_policy,
            options.results, options.verbose, extra=extra, label="calibrate", progress=tracker,
        )  # fmt: skip
    finally:
        tracker.progress.close()
