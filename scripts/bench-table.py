#!/usr/bin/env python3
"""The table of docs/explanation/performance.md, written from `make bench`'s results.

Reads results/bench/*.json (each benchmark's own document), writes one markdown row per
figure it knows (BENCHMARKS below: the file, how to read its figures) with the load average
the JSON recorded, and names the machine it runs on (CPU model, CPUs, memory: run it where
the benchmarks ran). A result file it has no row for is listed as such; a benchmark without
a result file is left out (run its `make bench-NAME`).

    .venv/bin/python scripts/bench-table.py                 # the table on stdout
    .venv/bin/python scripts/bench-table.py --write docs/explanation/performance.md
                                                            # between the page's markers
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
START = "<!-- bench-table: start (scripts/bench-table.py writes this part) -->"
END = "<!-- bench-table: end -->"
MAX_BYTES = 16 << 20  # a result document is a few KiB; refuse anything huge

Row = tuple[str, str, str, str]  # figure, measured, reference or target, met


def _get(doc: Any, *keys: str | int) -> Any:
    for k in keys:
        if isinstance(doc, dict) and isinstance(k, str):
            doc = doc.get(k)
        elif isinstance(doc, list) and isinstance(k, int) and -len(doc) <= k < len(doc):
            doc = doc[k]
        else:
            return None
    return doc


def _num(x: Any, digits: int = 1) -> str:
    return f"{x:,.{digits}f}" if isinstance(x, int | float) else "-"


def _met(x: Any) -> str:
    return {True: "met", False: "missed"}.get(x, "-") if isinstance(x, bool) else "-"


def rankstep(doc: dict) -> list[Row]:
    bare = _get(doc, "ways", "bare")
    step = _get(doc, "ways", "rankexec")
    added = _get(doc, "rankexec_added") or {}
    return [(
        "per-rank step (rankexec) over a bare exec of /bin/true, median "
        f"of {_get(doc, 'repeat')} starts",
        f"+{_num(added.get('ms_per_rank'), 2)} ms, +{added.get('fs_calls_per_rank')} "
        f"file-system calls ({_num(_get(step, 'wall', 'median_ms'), 2)} ms against "
        f"{_num(_get(bare, 'wall', 'median_ms'), 2)} ms)",
        f"<= {doc.get('target_ms')} ms, <= {doc.get('target_fs_calls')} calls",
        _met(added.get("meets_target")),
    )]  # fmt: skip


def plan(doc: dict) -> list[Row]:
    rows: list[Row] = []
    for case in doc.get("cases") or []:
        if not isinstance(case, dict):
            continue
        ours, ref = case.get("topobind_plan_json"), case.get("hwloc_distrib")
        instr = case.get("instructions_millions")
        target = f"<= {doc.get('target_ms')} ms" if case.get("targeted") else "(not targeted)"
        rows.append((
            f"`topobind plan --format json`, {case.get('name')}, {case.get('layout')}, "
            f"median of {doc.get('repeat')}",
            f"{_num(_get(ours, 'median_ms'))} ms ({_num(_get(ours, 'min_ms'))}.."
            f"{_num(_get(ours, 'max_ms'))}), {_num(_get(instr, 'topobind_plan_json'), 0)} "
            f"million instructions",
            f"`hwloc-distrib` {_num(_get(ref, 'median_ms'))} ms, "
            f"{_num(_get(instr, 'hwloc_distrib'), 0)} million; {target}",
            _met(case.get("within_100_ms")) if case.get("targeted") else "-",
        ))  # fmt: skip
    return rows


#: result file stem -> its rows
BENCHMARKS: dict[str, Callable[[dict], list[Row]]] = {"rankstep": rankstep, "plan": plan}


def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f.read(1 << 20).splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model}, {os.cpu_count()} CPUs, {mem:.0f} GiB"


def table(results: Path) -> str:
    lines = [
        f"Machine: {machine()}.",
        "",
        "| figure | measured | reference; target | target met | load average |",
        "| --- | --- | --- | --- | --- |",
    ]
    unknown: list[str] = []
    for path in sorted(results.glob("*.json")):
        if path.stat().st_size > MAX_BYTES:
            raise SystemExit(f"bench-table: {path}: larger than {MAX_BYTES} bytes; not a result")
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"bench-table: {path}: {exc}; rerun its make bench-NAME") from exc
        rows = BENCHMARKS.get(path.stem)
        if rows is None or not isinstance(doc, dict):
            unknown.append(path.name)
            continue
        load = _num(_get(doc, "loadavg_1min") or _get(doc, "load_average_before"))
        lines += [f"| {' | '.join(row)} | {load} |" for row in rows(doc)]
    if unknown:
        lines += ["", f"Results without a row here: {', '.join(unknown)}."]
    return "\n".join(lines) + "\n"


def write(page: Path, text: str) -> None:
    old = page.read_text()
    if START not in old or END not in old:
        raise SystemExit(f"bench-table: {page}: no {START!r} ... {END!r} markers; add them")
    head, rest = old.split(START, 1)
    tail = rest.split(END, 1)[1]
    tmp = page.with_suffix(".tmp")
    tmp.write_text(f"{head}{START}\n{text}{END}{tail}")
    tmp.replace(page)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=REPO / "results" / "bench")
    ap.add_argument("--write", type=Path, metavar="PAGE", help="replace the page's table")
    args = ap.parse_args()
    if not args.results.is_dir():
        print(f"bench-table: no {args.results}: run make bench first", file=sys.stderr)
        return 2
    text = table(args.results)
    if args.write:
        write(args.write, text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
