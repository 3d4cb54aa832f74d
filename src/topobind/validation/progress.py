"""Progress of long runs (``validate``, ``calibrate``, ``bench --repeat``): which node and
check, runs done of planned, time elapsed and an estimate of the time left.

Three modes: ``live`` (a terminal: one line per node and check in progress, redrawn in place,
and a plain line when a check finishes), ``plain`` (a log file or CI: one line per finished
run, nothing redrawn), ``quiet`` (cron: nothing). :func:`make` picks live or plain from
whether the stream is a terminal.

:class:`ReframeTracker` turns ReFrame's status lines (``[ RUN      ] NAME @SYS:PART+ENV``,
``[       OK ] (3/12) NAME ...``, ``FAIL``) into progress; the node is the test case's
``%.nid=`` parameter (``--each-node``), else the partition.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

_PARAM = re.compile(r" %([^ =]+)=(\S+)")
_RUN = re.compile(r"^\[\s*RUN\s*\]\s+(.+?)\s+(?:/[0-9a-f]+\s+)?@(\S+)")
_END = re.compile(
    r"^\[\s*(OK|FAIL|SKIP|ERROR)\s*\]\s+(?:\(\s*\d+/\d+\)\s+)?(.+?)\s+(?:/[0-9a-f]+\s+)?@(\S+)"
)


def clock(seconds: float) -> str:
    """``75`` -> ``1:15``; ``3725`` -> ``1:02:05``."""
    s = max(0, int(round(seconds)))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


@dataclass
class Item:
    node: str
    check: str
    planned: int
    done: int = 0
    started: float | None = None  # the run in progress
    durations: list[float] = field(default_factory=list)
    failed: int = 0


#: a run in progress says so at least this often (seconds): a plain line in a log, the live
#: lines redrawn on a terminal (DGEMM 1G ran 3:34 with no line)
HEARTBEAT_S = 10.0


class Progress:
    """Progress of (node, check) items. A run's expected time: the mean of that check's own
    runs once it has some, else ``estimates[check]`` (the check's cost model: what its runs
    took in this site's earlier reports, :func:`check_times`), else ``estimate``; a check
    with none of these is *not yet timed*, and the time left says so instead of borrowing
    other checks' times (DGEMM 1G is not a short STREAM). :meth:`beat` (every
    :data:`HEARTBEAT_S` from :func:`make`'s thread) says what is running between the lines
    of finished runs."""

    def __init__(
        self,
        stream: TextIO | None = None,
        mode: str = "plain",
        estimate: float | None = None,
        now: Callable[[], float] = time.monotonic,
        estimates: dict[str, float] | None = None,
    ) -> None:
        if mode not in ("live", "plain", "quiet"):
            raise ValueError(mode)
        self.stream = stream if stream is not None else sys.stderr
        self.mode, self.estimate, self.now = mode, estimate, now
        self.estimates = dict(estimates or {})
        self.items: dict[tuple[str, str], Item] = {}
        self.t0 = now()
        self.last_end = self.t0  # a run's time counts from its start or the last run's end
        self._drawn = 0
        self._said = self.t0  # when the last line was written
        self._lock = threading.RLock()  # the heartbeat's thread writes too
        self._stop: threading.Event | None = None
        self._beating: threading.Thread | None = None

    # ------------------------------------------------------------------ model
    def plan(self, node: str, check: str, runs: int) -> None:
        self.items.setdefault((node, check), Item(node, check, runs)).planned = runs

    def start(self, node: str, check: str) -> None:
        item = self.items.setdefault((node, check), Item(node, check, 1))
        item.started = self.now()
        self._draw()

    def skip(self, node: str, check: str) -> None:
        """A run that ReFrame skipped (a check the node cannot run, a sanity-only check after
        the session's first run): one run fewer to wait for, none in progress."""
        item = self.items.get((node, check))
        if item is not None:
            item.started = None
            item.planned = max(item.done, item.planned - 1)
            self._draw()

    def finish(self, node: str, check: str, ok: bool = True, note: str = "") -> None:
        item = self.items.setdefault((node, check), Item(node, check, 1))
        now = self.now()
        took = now - max(item.started if item.started is not None else now, self.last_end)
        self.last_end = now
        item.started = None
        item.done += 1
        item.planned = max(item.planned, item.done)
        item.durations.append(took)
        item.failed += not ok
        status = "ok" if ok else "FAIL"
        self._emit(
            f"{item.node}  {item.check}  run {item.done}/{item.planned} {status} in {clock(took)}"
            f"  (elapsed {clock(self.now() - self.t0)}{self._left_text()})"
            + (f"  {note}" if note else "")
        )

    def per_run(self, item: Item | None = None) -> float | None:
        """Seconds a run of ``item``'s check: its own runs', else its cost model's, else the
        estimate, else None (not yet timed); without ``item``: every run's mean, else the
        estimate."""
        if item is not None:
            own = [d for i in self.items.values() if i.check == item.check for d in i.durations]
            if own:
                return sum(own) / len(own)
            return self.estimates.get(item.check, self.estimate)
        took = [d for i in self.items.values() for d in i.durations]
        return sum(took) / len(took) if took else self.estimate

    def untimed(self) -> list[str]:
        """Checks with runs still to come and no time to expect of them (sorted)."""
        return sorted({i.check for i in self.items.values()
                       if i.planned > i.done and self.per_run(i) is None})  # fmt: skip

    def left(self) -> float | None:
        """Seconds left of the runs whose time is known: the runs not done times the seconds
        per run, less the time the runs in progress have already had (None: none known)."""
        now, total, known = self.now(), 0.0, False
        for i in self.items.values():
            per = self.per_run(i)
            if per is None:
                continue
            known = True
            total += max(0, i.planned - i.done) * per
            if i.started is not None:
                total -= min(now - i.started, per)
        return max(0.0, total) if known else None

    def _left_text(self) -> str:
        left, untimed = self.left(), self.untimed()
        if left is None:
            return f", {_untimed_text(untimed)}" if untimed and self.items else ""
        now = self.now()
        over = [i for i in self.items.values() if i.started is not None
                and now - i.started > (self.per_run(i) or float("inf"))]  # fmt: skip
        more = f" + {_untimed_text(untimed)}" if untimed else ""
        if over:  # the estimate is behind: say so rather than 'about 0:00 left'
            per = self.per_run(over[0]) or 0.0
            return (f", about {clock(left)} left after {over[0].check}, over its "
                    f"~{clock(per)} so far{more}")  # fmt: skip
        return f", about {clock(left)} left{more}"

    # ------------------------------------------------------------------ output
    def line(self, item: Item) -> str:
        run = min(item.done + 1, item.planned)
        since = self.now() - item.started if item.started is not None else 0.0
        per = self.per_run(item)
        est = f" of ~{clock(per)}" if per else ""
        return (
            f"{item.node}  {item.check}  run {run}/{item.planned}  {clock(since)}{est}  "
            f"(elapsed {clock(self.now() - self.t0)}{self._left_text()})"
        )

    def _emit(self, text: str) -> None:
        if self.mode == "quiet":
            return
        with self._lock:
            self._erase()
            self.stream.write(text + "\n")
            self._said = self.now()
            self._draw()

    def _erase(self) -> None:
        if self.mode == "live" and self._drawn:
            self.stream.write("\x1b[1A\x1b[2K" * self._drawn)
            self._drawn = 0

    def _draw(self) -> None:
        if self.mode != "live":
            return
        with self._lock:
            self._erase()
            active = [i for i in self.items.values() if i.started is not None]
            for item in active:
                self.stream.write(self.line(item) + "\n")
            self._drawn = len(active)
            self._said = self.now()
            self.stream.flush()

    def tick(self) -> None:
        """Redraw the live lines (elapsed time moves on)."""
        self._draw()

    def beat(self, every: float = HEARTBEAT_S) -> None:
        """When nothing was written for ``every`` seconds: the runs in progress, one line each
        (plain: written as lines; live: redrawn)."""
        with self._lock:
            closed = self._stop is not None and self._stop.is_set()
            if closed or self.mode == "quiet" or self.now() - self._said < every:
                return
            try:
                self._beat_lines()
            except (OSError, ValueError):  # the stream was closed or broke: no more beats
                if self._stop is not None:
                    self._stop.set()

    def _beat_lines(self) -> None:
        if self.mode == "live":
            self._draw()
            return
        active = [i for i in self.items.values() if i.started is not None]
        for item in active:  # "still running", so that a finished run's line is told apart
            text = self.line(item).replace(
                f"  {item.check}  run ", f"  {item.check}  still running: run ", 1
            )
            self.stream.write(text + "\n")
        if active:
            self._said = self.now()
            self.stream.flush()

    def start_heartbeat(self, every: float = HEARTBEAT_S) -> None:
        """Call :meth:`beat` from a daemon thread until :meth:`close`."""
        if self.mode == "quiet" or self._stop is not None:
            return
        stop = self._stop = threading.Event()

        def loop() -> None:
            while not stop.wait(min(1.0, every)):
                self.beat(every)

        self._beating = threading.Thread(target=loop, name="topobind-progress", daemon=True)
        self._beating.start()

    def close(self) -> None:
        """Stop the heartbeat (no line is written after this returns) and clear live lines."""
        if self._stop is not None:
            self._stop.set()
        if self._beating is not None and self._beating is not threading.current_thread():
            self._beating.join(timeout=5.0)  # a beat in progress ends; none starts after
        with self._lock:
            self._erase()
            if self.mode != "quiet":
                self.stream.flush()


def _untimed_text(checks: list[str]) -> str:
    """``DgemmCheck 1G not yet timed`` (at most three named, then how many more)."""
    named = ", ".join(checks[:3]) + (f" and {len(checks) - 3} more" if len(checks) > 3 else "")
    return f"{named} not yet timed"


def make(
    quiet: bool = False,
    stream: TextIO | None = None,
    estimate: float | None = None,
    estimates: dict[str, float] | None = None,
) -> Progress:
    """Live on a terminal, plain lines otherwise, nothing with ``quiet``; a run in progress
    is shown at least every :data:`HEARTBEAT_S` (call :meth:`Progress.close` at the end)."""
    out = stream if stream is not None else sys.stderr
    isatty = getattr(out, "isatty", lambda: False)()
    mode = "quiet" if quiet else ("live" if isatty else "plain")
    prog = Progress(out, mode, estimate, estimates=estimates)
    prog.start_heartbeat()
    return prog


def case_name(display_name: str, where: str) -> tuple[str, str]:
    """(node, check) of a ReFrame test case: ``StreamCheck %layout=numa %.nid=n2`` on
    ``local:slurm+builtin`` -> (``n2``, ``StreamCheck numa``)."""
    check = display_name.split(" %")[0].strip()
    params = dict(_PARAM.findall(display_name))
    node = params.pop(".nid", None) or where.split("+")[0]
    variant = ",".join(v for k, v in params.items() if not k.startswith("."))
    return node, f"{check} {variant}".strip()


def read_report(path: str | os.PathLike[str], limit: int, errors: str = "strict") -> str:
    """At most ``limit`` bytes of a report as text (:func:`topobind.inputs.read_head`: a
    FIFO or a device among the reports is an OSError, never a hang)."""
    from topobind.inputs import read_head

    return read_head(path, limit).decode("utf-8", errors=errors)


#: the newest reports of a site's partition that time its checks before they run
CHECK_TIMES_LOOK = 8
_STAMP = re.compile(r"\d{8}T\d{6}Z")  # a report's time in its name (run_reframe's stamp)


def check_times(results: Path, site: str, partition: str) -> dict[str, float]:
    """Each check's cost model before it has run in this session: the median time ReFrame
    gave its passing runs (``time_total``) in the newest :data:`CHECK_TIMES_LOOK` reports of
    ``site``'s ``partition`` under ``results`` (validate, calibrate, --each-node), keyed as
    the progress lines name checks (``DgemmCheck 1G``). A report that cannot be read is
    passed over; none: an empty map (the checks are 'not yet timed')."""
    from topobind.errors import TopobindError
    from topobind.measure.stats import median
    from topobind.validation import reframe_report

    found = sorted((results / "reports").glob(f"*-{site}-{partition}-*.json"),
                   key=lambda f: (_STAMP.findall(f.name) or [""])[-1])  # fmt: skip
    times: dict[str, list[float]] = {}
    for path in [f for f in found if not f.name.endswith(".conformance.json")][-CHECK_TIMES_LOOK:]:
        try:
            doc = reframe_report.parse_json(read_report(path, 64 << 20), str(path))
            rep = reframe_report.report_from_document(doc, str(path))
        except (OSError, ValueError, TopobindError):
            continue
        for c in rep.cases:
            if c.result == "pass" and c.seconds is not None:
                times.setdefault(case_name(c.display, "")[1], []).append(c.seconds)
    return {check: median(xs) for check, xs in times.items()}


class ReframeTracker:
    """Feeds ReFrame's status lines into a :class:`Progress`; ``runs`` per test case
    (``--reruns N-1``: N)."""

    def __init__(self, progress: Progress, runs: int = 1) -> None:
        self.progress, self.runs = progress, runs

    def feed(self, line: str) -> bool:
        """Take one line of ReFrame's output; True when it was a RUN/OK/FAIL status line
        (shown as progress), False for anything else (the caller shows it or not)."""
        text = line.strip()
        m = _RUN.match(text)
        if m:
            node, check = case_name(m.group(1), m.group(2))
            if (node, check) not in self.progress.items:
                self.progress.plan(node, check, self.runs)
            self.progress.start(node, check)
            return True
        m = _END.match(text)
        if m and m.group(1) == "SKIP":
            self.progress.skip(*case_name(m.group(2), m.group(3)))
            return True
        if m:
            node, check = case_name(m.group(2), m.group(3))
            self.progress.finish(node, check, ok=m.group(1) == "OK")
            return True
        return False


# --------------------------------------------------------------------------- before a run
@dataclass(frozen=True)
class Expected:
    """The expected run time of an ``--each-node`` run (None: unknown) and why."""

    seconds: float | None
    per_node: float | None
    text: str


def parse_duration(value: object, where: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h`` -> seconds (:func:`topobind.inputs.duration`)."""
    from topobind.inputs import duration

    return duration(value, where)


def expected_time(reports: list[str], nodes: int, repeat: int, max_jobs: int) -> Expected:
    """From the newest complete, successful ``--each-node`` report of this site and partition
    (``reports``: its candidates, oldest first; :func:`run_timing` says which time a run):
    seconds per check run (the session's time over its check runs) x the checks per node x
    ``repeat``, in waves of ``max_jobs`` nodes (the last wave as long as a full one)."""
    if not reports:
        return Expected(None, None, "expected run time: unknown (no earlier --each-node run of "
                        "this partition to time the checks by; this one will be)")  # fmt: skip
    left_out: list[str] = []
    for path in reversed(reports):
        got = run_timing(path)
        if isinstance(got, str):
            left_out.append(got)
            continue
        elapsed, checks, runs = got
        per_run = elapsed / runs
        lanes = max(1, min(max_jobs, nodes))
        node_s = checks * repeat * per_run
        total = node_s * -(-nodes // lanes)
        skipped = f"; {len(left_out)} newer run(s) left out: {left_out[0]}" if left_out else ""
        return Expected(
            total,
            node_s,
            f"expected run time: about {clock(total)} ({nodes} node(s) x {checks} checks x "
            f"{repeat} runs at {per_run:.1f} s a check, {lanes} node(s) at a time; "
            f"{clock(node_s)} a node; timed by {path}{skipped})",
        )
    why = f"no complete, successful earlier run of these checks to time them by: {left_out[0]}"
    return Expected(None, None, f"expected run time: unknown ({why}; this one will be)")


def run_timing(path: str) -> tuple[float, int, int] | str:
    """(session seconds, checks a node, check runs) of an earlier ``--each-node`` report, or
    why it cannot time a run: only a complete, successful one does (a failed check ends
    early or runs long, a run stopped by Ctrl-C did part of its work)."""
    from topobind.errors import TopobindError
    from topobind.validation import reframe_report

    try:
        doc = reframe_report.parse_json(read_report(path, 64 << 20), path)
        rep = reframe_report.report_from_document(doc, path)
        info = doc["session_info"]
        elapsed = float(info["time_elapsed"])
    except (OSError, KeyError, TypeError, ValueError, TopobindError) as exc:
        return f"{path}: {exc}"
    ran = [c for c in rep.cases if c.result != "skip"]
    if not ran or elapsed <= 0:
        return f"{path} ran no check"
    bad = [c for c in ran if c.result != "pass"]
    aborted = info.get("num_aborted") if isinstance(info, dict) else None
    if bad or (isinstance(aborted, int) and aborted > 0):
        what = "was interrupted" if aborted or any("abort" in c.result for c in bad) else (
            f"had {len(bad)} failed check run(s)")  # fmt: skip
        return f"{path} {what}"
    first = [c for c in ran if c.run == min(c.run for c in ran)]
    per_node = {c.node for c in first} or {""}
    return elapsed, max(1, len(first) // len(per_node)), len(ran)


def expected_run(site: Any, partition: str, nodes: int, repeat: int, results: Path,
                 selection: tuple[str, tuple[str, ...]] | None = None,
                 smoke: Collection[str] = (), wave: int | None = None) -> Expected:  # fmt: skip
    """The expected time of an ``--each-node`` run of ``nodes`` nodes of ``site``'s
    ``partition``, timed by the last complete, successful such run's report in ``results``
    that chose the same checks (``selection``: its tags and -n names; another set of checks
    has another count; ``smoke``: the -S variables that make a quick session the smoke tier),
    ``wave`` nodes at a time (default: every node at once)."""
    pattern = f"each-node-{site.name}-{partition}-*.json"
    found = sorted(f for f in (results / "reports").glob(pattern)
                   if not f.name.endswith(".conformance.json"))  # fmt: skip
    if selection is not None and found:
        same = [f for f in found[-SAME_SELECTION_LOOK:] if report_selection(f, smoke) == selection]
        if not same:
            tags, names = selection
            chosen = f"-t {tags}" + "".join(f" -n {n}" for n in names)
            why = f"no earlier --each-node run of these checks ({chosen}) to time them by"
            return Expected(None, None, f"expected run time: unknown ({why}; this one will be)")
        found = same
    # one job a node, every node at once (topobind.validation.node_jobs; waves only past the
    # site's limit on queued jobs)
    return expected_time([str(f) for f in found], nodes, repeat, wave or nodes)


SAME_SELECTION_LOOK = 20  # the newest reports looked at for one of the same checks


def report_selection(path: Path, smoke: Collection[str] = ()) -> tuple[str, tuple[str, ...]] | None:
    """(tags, -n names) of the ReFrame session behind a report: its session_info.cmdline,
    read from the report's first 64 KiB (it comes first; None when it is not there); tags
    'smoke' for a quick session that set every variable of ``smoke``."""
    import json
    import shlex

    try:
        head = read_report(path, 1 << 16, errors="replace")
        m = re.search(r'"cmdline":\s*("(?:[^"\\]|\\.)*")', head)
        args = shlex.split(json.loads(m.group(1))) if m else None
    except (OSError, ValueError):
        return None
    if args is None:
        return None
    tags = [b for a, b in zip(args, args[1:], strict=False) if a in ("-t", "--tag")]
    names = tuple(b for a, b in zip(args, args[1:], strict=False) if a in ("-n", "--name"))
    tag = tags[-1] if tags else ""
    given = {b.partition("=")[0] for a, b in zip(args, args[1:], strict=False) if a == "-S"}
    if tag == "quick" and smoke and set(smoke) <= given:
        tag = "smoke"  # the smoke tier runs ReFrame's quick checks at their smallest size
    return (tag, names)


def check_budget(site: Any, exp: Expected) -> None:
    """Refuse, in one line, a run over the site's per-node budget (settings.node_budget)."""
    from topobind.errors import TopobindError

    key = "each_node.node_budget" if "each_node.node_budget" in site.settings else "node_budget"
    budget = site.settings.get(key)  # each_node.X replaces X (--each-node is its only reader)
    if budget is None or exp.per_node is None:
        return
    limit = parse_duration(budget, f"{site.path}: settings.{key}")
    if exp.per_node > limit:
        raise TopobindError(
            f"the plan needs about {clock(exp.per_node)} a node, over the site's "
            f"{key} of {clock(limit)} ({site.path}): use --tags quick, a "
            f"smaller --repeat, or raise settings.{key}"
        )
