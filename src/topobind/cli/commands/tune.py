"""``topobind tune``: the user's program under candidate placements, the best chosen with
confidence (engine: :mod:`topobind.tune.engine`); ``topobind tune --list``: the records that
``--layout auto`` uses."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Callable
from typing import Any

from topobind import jsonfmt
from topobind.cli.arguments import checked_arg, count_arg
from topobind.errors import TopobindError, plural
from topobind.launch.shape import RunOptions
from topobind.plan import memory
from topobind.tune import records, stats
from topobind.tune.candidates import Choices, parse_layouts, parse_list
from topobind.tune.session import Measured, Settings, Standing, parse_budget, ratio

EPILOG = """\
examples:
  topobind tune -- ./my_app input.dat                      # every candidate of this node
  topobind tune --pages 4k,2M -- ./chase                   # page sizes only
  topobind tune --cpus 8 --layouts compact,spread -- ./hybrid_app
  topobind tune --metric 'GFLOPS: ([0-9.]+)' --maximize -- ./xhpl
  topobind tune --list                                     # the records --layout auto uses

Every run goes through the launch topobind run makes (launcher, per-rank step, files,
environment; inside a Slurm or Flux allocation over all its nodes), each candidate's launch
verified once with the placement probe before its first run. The baseline is the program
launched plainly. Candidates run interleaved in a shuffled round-robin, one warm-up run each
not counted; a run under load (other processes' CPU share above validate's 25 %) is made
again once. Every claim holds at 5 % error for the whole session: the error rate is spent
over the planned looks (alpha spending) and split over every pair of candidates. A win or a
drop needs an effect beyond --min-gain; "no difference" only when every interval lies within
it; otherwise the session is undecided and says which interval a longer --budget would
narrow. A failed run counts as the worst (censored); a candidate failing more often than the
baseline never wins. A run's limit is the budget left plus a grace (10 %, 5-60 s). A decided
session is recorded in the state folder ($TOPOBIND_STATE_DIR, else
$XDG_STATE_HOME/topobind, else ~/.local/state/topobind), checked writable before the first
run; topobind run --layout auto uses it. Ctrl-C prints the table so far and writes no record.
"""


def _checked(
    p: argparse.ArgumentParser, flag: str, parse: Callable[[str], Any], metavar: str,
    default: object, help: str,
) -> None:  # fmt: skip
    """``flag`` read by ``parse`` (its TopobindError: argparse's one-line error naming it)."""
    p.add_argument(flag, type=checked_arg(parse, flag), default=default, metavar=metavar,
                   help=help)  # fmt: skip


def add_subparser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tune",
        help="run your program under candidate placements and choose the best with confidence",
        description="Measure PROGRAM under candidate placements (layouts, memory policies, "
        "page sizes, ranks x threads) against the plain launch; report the winner.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--layouts", type=checked_arg(parse_layouts, "--layouts"), metavar="L,..",
                   help="layouts to try (default: every layout that plans here)")  # fmt: skip
    mem = checked_arg(lambda t: parse_list(t, "--mem", memory.POLICIES), "--mem")
    p.add_argument("--mem", type=mem, metavar="M,..",
                   help="memory policies to try (default: those that place differently on "
                   "this node; one NUMA node: local only)")  # fmt: skip
    pages = [x for x in memory.PAGES if x != "auto"]
    page_list = checked_arg(lambda t: parse_list(t, "--pages", pages), "--pages")
    p.add_argument("--pages", type=page_list, metavar="P,..",
                   help="page sizes to try: " + ", ".join(pages) + " (default: thp and the "
                   "hugetlb sizes with free pages)")  # fmt: skip
    p.add_argument(
        "--ranks",
        "-r",
        type=count_arg("--ranks"),
        metavar="R",
        help="MPI ranks per node (default: the allocation's, else the layout's)",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--threads", "-T", type=count_arg("--threads"), metavar="T",
                       help="OpenMP threads per rank")  # fmt: skip
    group.add_argument("--cpus", type=count_arg("--cpus", 1, 4096), metavar="N",
                       help="try every ranks x threads split of N CPUs")  # fmt: skip
    _checked(
        p,
        "--budget",
        parse_budget,
        "DURATION",
        600.0,
        "stop after this long: seconds, or a number with s, m (or min), h or d, exactly "
        "(e.g. 90s, 10m, 1h; default 10m; at most 7d)",
    )
    _checked(
        p,
        "--metric",
        _metric,
        "REGEX",
        None,
        "the figure: the first group of the first match in the program's output (its "
        "first 4 MiB, searched for at most 5 s a run; ASCII digits, one decimal point, an "
        "optional exponent: a comma is refused; lower is better); default: wall time",
    )
    p.add_argument("--maximize", action="store_true",
                   help="with --metric: higher is better (a rate)")  # fmt: skip
    _checked(
        p,
        "--min-gain",
        _percent,
        "PCT",
        3.0,
        "the margin, in %% (default 3): a winner or a drop needs an effect beyond it, "
        "'no difference' an interval within it",
    )
    p.add_argument("--seed", type=count_arg("--seed", 0, 2**31), metavar="N",
                   help="seed of the shuffled order (default: random)")  # fmt: skip
    p.add_argument("--rank-step", choices=("auto", "always", "never"), default="auto",
                   help="as topobind run's: the per-rank step only where the launcher's "
                   "binding is not exact (auto), always (it also binds a program's own "
                   "threads, pthreads too, to the rank's CPUs), or never")  # fmt: skip
    p.add_argument("--format", "-f", choices=("text", "json"), default="text")
    p.add_argument("--list", action="store_true", help="list the tune records and exit")
    p.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    p.set_defaults(func=run_tune)


def _metric(text: str) -> Any:
    """--metric REGEX compiled when the line is parsed: a bad pattern is refused before any
    planning, in one line."""
    from topobind.tune.launching import compile_metric

    return compile_metric(text)


def _percent(text: str) -> float:
    try:  # ASCII only: float() takes '٣' and '1_0'
        plain = text.isascii() and "_" not in text
        value = float(text.strip().removesuffix("%")) if plain else math.nan
    except ValueError:
        value = math.nan
    if not 0 <= value < 100:
        raise TopobindError(f"--min-gain {text[:20]!r}: give a percentage from 0 to 99 (e.g. 3)")
    return value


def run_tune(args: argparse.Namespace) -> int:
    if args.list:
        return _list(args.format)
    from topobind.tune.engine import prepare, tune  # the launch stack: only when tuning

    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise TopobindError("no program given; put it after '--', e.g. topobind tune -- ./a.out")
    if args.maximize and args.metric is None:
        raise TopobindError("--maximize needs --metric REGEX (wall time is lower-better)")
    metric = args.metric  # compiled by its type (_metric)
    choices = Choices(args.layouts, args.mem, args.pages, args.ranks, args.threads, args.cpus)
    settings = Settings(budget_s=args.budget, min_gain=args.min_gain / 100,
                        maximize=args.maximize, seed=args.seed)  # fmt: skip
    ready = prepare(program, choices)
    for note in ready.notes:
        print(f"topobind: note: {note}", file=sys.stderr)
    print(f"topobind: tune: {plural(len(ready.planned), 'candidate')} (the baseline included): "
          + ", ".join(p.candidate.name for p in ready.planned), file=sys.stderr)  # fmt: skip
    opts = RunOptions(rank_step=args.rank_step)
    done = tune(ready, settings, metric, _progress(metric is not None), opts)
    if args.format == "json":
        print(jsonfmt.dumps(_json(done, settings)))
    else:
        _print_text(done, settings, metric is not None, args.rank_step)
    if done.outcome.verdict == "too-short":
        return 2  # the budget: an input too short to judge (said in the headline)
    return 130 if done.outcome.stopped == "interrupted" else 0


def _progress(has_metric: bool) -> Any:
    def said(s: Standing, warmup: bool, run: Measured, left_s: float) -> None:
        again = (run.reason or "").startswith("under load")  # not yet counted: made again
        what = "warm-up" if warmup else f"run {s.runs + again}"
        got = run.reason or (f"{run.value:g}" if has_metric else f"{run.wall:.3f} s")
        print(f"topobind: tune: [{_clock(left_s)} left] {s.candidate.name}: {what}: {got}",
              file=sys.stderr, flush=True)  # fmt: skip

    return said


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


def _vs_baseline(s: Standing, base: Standing | None, maximize: bool,
                 level: float) -> stats.Ratio | None:  # fmt: skip
    """The candidate's figure over the baseline's (as measured: a time ratio, or a rate
    ratio with --maximize), with its interval at the session's per-interval level."""
    if base is None or s is base or s.runs < 2 or base.runs < 2 or not s.values:
        return None
    return ratio(base, s, level) if maximize else ratio(s, base, level)


def _row(s: Standing, base: Standing | None, settings: Settings, unit: str,
         level: float) -> list[str]:  # fmt: skip
    med = f"{stats.median(s.values):.4g}{unit}" if s.values else "-"
    rng = f"{min(s.values):.4g} .. {max(s.values):.4g}" if s.values else "-"
    r = _vs_baseline(s, base, settings.maximize, level)
    vs = "1 (itself)" if s is base else (
        "-" if r is None else f"{r.estimate:.3f} [{_num(r.low)} .. {_num(r.high)}]")  # fmt: skip
    when = (f"dropped after round {s.dropped_round}: {s.dropped}" if s.dropped_round
            else s.dropped or "in the race")  # fmt: skip
    when = "left the race" if str(s.dropped).startswith("fails") else when
    busy = f"; {s.busy} under load" if s.busy else ""
    failed = f"; fails {len(s.failures)} of {plural(len(s.walls), 'run')}: {s.failures[-1]}" \
        if s.failures else ""  # fmt: skip
    return [s.candidate.name, str(s.runs), med, rng, vs, when + failed + busy]


def _num(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.3f}"


def _print_text(done: Any, settings: Settings, has_metric: bool, rank_step: str) -> None:
    out = done.outcome
    base = next((s for s in out.standings if s.candidate.baseline), None)
    unit = "" if has_metric else " s"
    head = ["candidate", "runs", "median", "range", "vs baseline [interval]", "status"]
    rows = [head] + [_row(s, base, settings, unit, out.level) for s in out.standings]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    print(f"stopped: {_why(out.stopped)} after {plural(out.rounds, 'round')}")
    if out.noise is not None:
        n = out.noise
        print(f"load: other processes took a median {n['median_share'] * 100:.0f} % of the CPUs "
              f"during the counted runs; {n['busy_runs']} of {n['runs']} beyond "
              f"{n['threshold'] * 100:.0f} % (each made again once first: {n['reruns']})"
              + ("; a busy node" if n["busy"] else ""))  # fmt: skip
    else:  # inside a Flux allocation (the note above), no counted run, or no /proc/stat
        print("load: not measured")
    for name, verdict in done.verdicts.items():
        print(f"  {name}: {verdict}")
    _print_verdict(done, settings, rank_step)


def _why(stopped: str) -> str:
    return {"decided": "decided", "budget": "--budget spent",
            "max-runs": "every candidate reached the most runs",
            "one-left": "one candidate left", "too-short": "--budget too short for a verdict",
            "interrupted": "interrupted (Ctrl-C): the table so far",
            }.get(stopped, stopped)  # fmt: skip


def _print_verdict(done: Any, settings: Settings, rank_step: str) -> None:
    out = done.outcome
    what = "rate" if settings.maximize else "speed"
    print(out.headline)
    for whom, g in out.gains.items():
        whom = f"runner-up ({out.runner_up})" if whom == "runner-up" and out.runner_up else whom
        print(f"  gain over the {whom}: {g.estimate * 100:+.1f} % {what} [interval "
              f"{g.low * 100:+.1f} % .. {_pct(g.high)}]")  # fmt: skip
    if out.verdict not in ("too-short", "interrupted", "failing"):
        print(f"  every claim at {(1 - settings.level) * 100:g} % error over the whole session "
              f"(each interval at {out.level * 100:.4g} %), margin --min-gain "
              f"{settings.min_gain * 100:g} %")  # fmt: skip
    pick = out.recommended if out.decided else None
    if pick is not None:
        _print_job_lines(done, pick, rank_step)
    if done.record:
        print(f"record: {done.record} (topobind run --layout auto uses it)")
    elif out.verdict == "interrupted":
        print("no record written (interrupted before anything was decided)")
    else:
        print("no record written (nothing decided: give a longer --budget, or fewer "
              "candidates)")  # fmt: skip


def _pct(x: float) -> str:
    return "+inf %" if math.isinf(x) else f"{x * 100:+.1f} %"


def _print_job_lines(done: Any, pick: Standing, rank_step: str) -> None:
    """The lines for a job script: the topobind run line, and the plain launch when no
    per-rank step file is needed (what topobind run runs, without topobind)."""
    c = pick.candidate
    prog = shlex.join(done.program)
    print("job script:")
    if c.baseline:
        print(f"  {prog}")
        return
    words = records.Choice(c.layout or "compact", c.mem, c.pages, c.ranks, c.threads).words()
    words += "" if rank_step == "auto" else f" --rank-step {rank_step}"
    print(f"  topobind run {words} -- {prog}")
    launch = done.launches.get(c.name)
    if launch is not None and not any(".topobind-run-" in a for a in launch[0]):
        print("  # or, without topobind at run time:")
        for name, value in launch[1].items():
            print(f"  export {name}={shlex.quote(value)}")
        print("  " + shlex.join(launch[0]))


def _json(done: Any, settings: Settings) -> dict[str, Any]:
    out = done.outcome
    base = next((s for s in out.standings if s.candidate.baseline), None)
    win = out.winner
    winner = None
    if win is not None:
        c = win.candidate
        g = min(out.gains.values(), key=lambda r: r.low)
        winner = {"layout": c.layout, "mem": c.mem, "pages": c.pages, "ranks": c.ranks,
                  "threads": c.threads, "gain": g.estimate,
                  "ci": [g.low, g.high if math.isfinite(g.high) else None]}  # fmt: skip
    rec = out.recommended.candidate.name if out.recommended is not None else None
    cands = []
    for s in out.standings:
        r = _vs_baseline(s, base, settings.maximize, out.level)
        cands.append({
            "name": s.candidate.name, "layout": s.candidate.layout, "mem": s.candidate.mem,
            "pages": s.candidate.pages, "ranks": s.candidate.ranks,
            "threads": s.candidate.threads, "runs": s.values, "failures": s.failures,
            "counted_runs": s.runs, "failed_runs": s.failed, "busy_runs": s.busy,
            "reruns": s.reruns,
            "walls": s.walls,
            "median": stats.median(s.values) if s.values else None,
            "vs_baseline": None if r is None else
            {"ratio": r.estimate, "ci": [r.low, r.high] if math.isfinite(r.high) else None},
            "dropped": s.dropped, "dropped_round": s.dropped_round,
            "verified": done.verdicts.get(s.candidate.name),
        })  # fmt: skip
    return {"verdict": out.verdict, "headline": out.headline, "level": out.level,
            "noise": out.noise,
            "gains": {k: [g.low, g.estimate, g.high if math.isfinite(g.high) else None]
                      for k, g in out.gains.items()},
            "winner": winner, "recommended": rec, "stopped": out.stopped, "rounds": out.rounds,
            "maximize": settings.maximize, "min_gain": settings.min_gain,
            "record": done.record, "candidates": cands}  # fmt: skip


def _list(fmt: str) -> int:
    found, bad = records.read_all()
    for line in bad:
        print(f"topobind: warning: {records.shown(line, 400)}", file=sys.stderr)
    if fmt == "json":
        print(jsonfmt.dumps([r._asdict() | {"choice": r.choice._asdict()} for r in found]))
        return 0
    if not found:
        print(f"no tune records in {records.records_dir()}")
        return 0
    from topobind.tune.auto import how

    for r in found:
        print(f"{records.shown(r.when[:19])}  {records.shown(r.program)}  node type "
              f"{records.shown(r.node_type, 40)}, {plural(r.nodes, 'node')}: "
              f"{r.choice.words()} ({how(r)})  {records.shown(r.path)}")  # fmt: skip
    return 0
