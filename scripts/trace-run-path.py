#!/usr/bin/env python3
"""Which topobind modules a ``topobind run ...`` call passes through (issue 28 item 4).

Counts, below ``cli/commands/run.run_program``: the modules whose functions are called,
the module-to-module call edges (caller -> callee, module-level code left out), the pairs
of modules that call each other (back and forth), and the calls that cross a module.

    scripts/trace-run-path.py -l compact --launcher none -r 1 --verify -- true
    TRACE_VERBOSE=1 scripts/trace-run-path.py ...   # the modules and the two-way pairs too
    TRACE_VERBOSE=2 scripts/trace-run-path.py ...   # and every edge
"""

from __future__ import annotations

import collections
import os
import sys
from types import FrameType
from typing import Any

ENTRY = ("topobind.cli.commands.run", "run_program")


def _module(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", ""))


def _ours(frame: FrameType) -> bool:
    return _module(frame).startswith("topobind") and frame.f_code.co_name != "<module>"


def main(argv: list[str]) -> int:
    calls: collections.Counter[str] = collections.Counter()
    edges: collections.Counter[tuple[str, str]] = collections.Counter()
    depth = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if (_module(frame), frame.f_code.co_name) == ENTRY:
            depth[0] += {"call": 1, "return": -1}.get(event, 0)
            calls[ENTRY[0]] += event == "call"
            return
        if event != "call" or not depth[0] or not _ours(frame):
            return
        calls[_module(frame)] += 1
        back = frame.f_back
        while back is not None and not _ours(back):
            back = back.f_back
        if back is not None and _module(back) != _module(frame):
            edges[(_module(back), _module(frame))] += 1

    from topobind.cli.main import main as topobind

    sys.setprofile(profile)
    try:
        status = topobind(["run", *argv])
    except SystemExit as exc:
        status = exc.code
    finally:
        sys.setprofile(None)
    both = sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
    err = sys.__stderr__ or sys.stderr
    print(
        f"exit={status} modules={len(calls)} edges={len(edges)} two-way={len(both)} "
        f"cross-module-calls={sum(edges.values())}",
        file=err,
    )
    verbose = os.environ.get("TRACE_VERBOSE", "")
    if verbose:
        for name in sorted(calls):
            print(f"  module {name} ({calls[name]} calls)", file=err)
        for a, b in both:
            print(f"  two-way {a} <-> {b}", file=err)
    if verbose == "2":
        for (a, b), n in sorted(edges.items()):
            print(f"  edge {a} -> {b} ({n})", file=err)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
