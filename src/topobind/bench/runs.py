"""``topobind bench``: run a kernel on a planned layout, save every result, summarise repeats.

One run = one kernel process (``kernels/bin/KERNEL``) with the plan's ``OMP_*`` environment and
``TOPOBIND_LAYOUT`` (so the result records the layout). Each result is validated
(:func:`topobind.measure.results.load_result`) and saved atomically as
``RESULTS/<host>/<kernel>/<timestamp>-<layout>.json``; the headline values of the repeats are
summarised with :func:`topobind.measure.stats.summarize` (median, best, CV).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from topobind.errors import TopobindError
from topobind.fsutil import atomic_write_text
from topobind.launch.rank_step import job_env
from topobind.launch.shape import JobShape
from topobind.measure import registry as kernel_registry
from topobind.measure import stats
from topobind.measure.evidence import evidence_line
from topobind.measure.programs import run_kernel
from topobind.measure.results import Result, load_result, result_document
from topobind.plan.model import Plan
from topobind.topo.topology import format_list

PAGE_CHOICES = ("1G", "2M", "thp", "4k", "auto")


@dataclass(frozen=True)
class BenchRun:
    path: Path
    result: Result


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def result_path(root: str | os.PathLike[str], host: str, kernel: str, layout: str | None) -> Path:
    """``root/<host>/<kernel>/<UTC timestamp, microseconds>-<layout>.json`` (unique)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return Path(root) / _safe(host) / kernel / f"{now}-{_safe(layout or 'none')}.json"


def kernel_env(plan: Plan) -> dict[str, str]:
    """A one-process kernel's environment: the launch path's (no launcher)."""
    return job_env(JobShape(plan=plan))


def memory_step(plan: Plan, tmp: Path) -> list[str]:
    """``rankexec FILE``: the per-rank step that applies the plan's memory (``%mem=`` policy,
    ``%thp=off``) before the kernel starts, as ``topobind run`` does; [] when the plan's memory
    needs no step (the kernel's defaults, or one NUMA node and the kernel's pages)."""
    from topobind.launch.spank_step import step_text
    from topobind.measure.programs import find_kernel
    from topobind.plan.memory import needs_step

    if not needs_step(plan):
        return []
    path = tmp / "rank-step"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # rankexec's rule: ours only
    with os.fdopen(fd, "w") as f:
        f.write(step_text(plan))
    return [str(find_kernel("rankexec")), str(path), "--"]


def headline_text(res: Result) -> str:
    if res.headline is None:
        cpus = ",".join(str(c) for c in res.cpus())
        return f"{res.threads} thread(s) on cpus (OS index) {cpus}"
    h = res.headline
    return f"{h.metric} {h.value:.6g} {h.unit}"


def run_repeats(
    kernel: str,
    plan: Plan,
    *,
    repeat: int = 1,
    pages: str | None = None,
    strict: bool = False,
    extra: Sequence[str] = (),
    results_root: str | os.PathLike[str] = "results",
    progress: Callable[[str], None] | None = None,
    timeout: float = 3600.0,
    topology: str | None = None,
) -> list[BenchRun]:
    """Run ``kernel`` ``repeat`` times on ``plan``, save each result; KernelError on failure.

    ``topology`` (``synthetic:...``, see :func:`topobind.topo.topology.synthetic_description`) is
    recorded as ``params.topology``, so ``topobind report`` can draw the layout elsewhere."""
    spec = kernel_registry.find(kernel)
    if spec is None or not spec.local:
        names = ", ".join(k.name for k in kernel_registry.local_kernels())
        raise TopobindError(f"unknown kernel {kernel!r}; choose one of {names}")
    if repeat < 1:
        raise TopobindError(f"--repeat must be >= 1, got {repeat}")
    if plan.nranks != 1:
        raise TopobindError(
            f"'topobind bench {kernel}' runs one process, the plan has {plan.nranks} ranks; use "
            "--ranks 1 (several ranks: topobind run -- kernels/bin/" + kernel + ")"
        )
    if not spec.big_buffer and (pages or strict):
        raise TopobindError(f"{kernel} has no big buffer: drop --pages/--strict")
    if pages is not None and pages not in PAGE_CHOICES:
        raise TopobindError(f"--pages {pages!r}: choose one of {', '.join(PAGE_CHOICES)}")
    args: list[str] = []
    if pages:
        args += ["--pages", pages]
    if strict:
        args.append("--strict")
    env = kernel_env(plan)
    memory = plan.ranks[0].memory
    if spec.pins_own_threads:
        # e.g. c2c pins its own two threads per pair: give it the plan's PUs (OS indexes)
        # instead of an OpenMP binding (which would shrink the process mask to one place)
        if "--cpus" not in extra:
            args += ["--cpus", format_list(plan.ranks[0].cpus)]
        for var in ("OMP_PLACES", "OMP_PROC_BIND"):
            env.pop(var, None)
    args += list(extra)
    runs: list[BenchRun] = []
    host = os.uname().nodename
    with tempfile.TemporaryDirectory(prefix="topobind-bench-") as tmp:
        step = memory_step(plan, Path(tmp))
        for i in range(1, repeat + 1):
            res = run_kernel(
                kernel, args, env=env, timeout=timeout, json_path=Path(tmp) / "r.json",
                launcher=step,
            )  # fmt: skip
            dest = result_path(results_root, res.host or host, kernel, res.layout)
            if topology:
                res = replace(res, params={**res.params, "topology": topology})
            if memory is not None:  # the memory plan the kernel ran with (policy, pages)
                res = replace(res, params={**res.params, "memory": memory.to_dict()})
            atomic_write_text(dest, json.dumps(result_document(res), indent=1) + "\n")
            runs.append(BenchRun(dest, load_result(dest)))
            if progress is not None:
                progress(f"[{i}/{repeat}] {kernel} {headline_text(res)}")
    return runs


def summary_text(runs: Sequence[BenchRun]) -> str:
    """Short human summary: headline median/best/CV over the runs, and where they were saved."""
    if not runs:
        return "no runs"
    first = runs[0].result
    where = runs[0].path.parent
    valid = sum(1 for r in runs if r.result.valid)
    lines = []
    if first.headline is None:
        lines.append(f"{first.kernel}: {len(runs)} run(s), {valid} valid; {headline_text(first)}")
    else:
        h = first.headline
        values = [r.result.headline_value or 0.0 for r in runs]
        s = stats.summarize(values, h.higher_is_better)
        cv = "n/a (1 run)" if s.cv is None else f"{100 * s.cv:.2f}%"
        direction = "higher" if h.higher_is_better else "lower"
        lines.append(
            f"{first.kernel} {h.metric} ({h.stat} per run, {h.unit}, {direction} is better) over "
            f"{s.n} run(s), {valid} valid: median {s.median:.6g}  best {s.best:.6g}  CV {cv}"
        )
    lines += caveats(first.kernel, first.params)
    lines.append(evidence_summary([r.result for r in runs]))
    lines.append(f"layout {first.layout}, {first.ranks} rank(s) x {first.threads} thread(s)")
    lines.append(f"results: {len(runs)} file(s) in {where}/")
    return "\n".join(lines)


def caveats(kernel: str, params: dict[str, object]) -> list[str]:
    """What a figure does not say on its own and its result's params know, one short line
    each: a STREAM whose arrays are under 4x the last-level cache measured the cache."""
    if kernel != "stream" or params.get("elements_at_least_4x_llc") is not False:
        return []
    llc, size = params.get("llc_bytes_total"), params.get("bytes_per_array")
    if not isinstance(llc, int) or not isinstance(size, int) or llc <= 0:
        return []
    need = -(-4 * llc // 8)  # elements a array of 4x the LLC (stream.c's min_elems)
    mib = 1 << 20
    return [
        f"caveat: each array ({size / mib:.1f} MiB) is under 4x the last-level cache "
        f"({llc / mib:.1f} MiB): a cache's bandwidth, not memory's; give --elements {need} "
        "or more"
    ]


def evidence_summary(results: Sequence[Result]) -> str:
    """The evidence line of the runs (:func:`topobind.measure.evidence.evidence_line`): of the
    run whose CPUs were the most taken (busy, stolen or throttled) when there are several."""

    def taken(r: Result) -> float:
        ev = r.evidence
        names = ("busy_share", "steal_share", "throttled_share")
        return -1.0 if ev is None else sum(ev.signal(n) or 0.0 for n in names)

    worst = max(results, key=taken)
    line = evidence_line(worst.evidence, "the kernel wrote none: rebuild it (make kernels)")
    if len(results) > 1:
        line = line.replace("evidence:", f"evidence (most taken of {len(results)} runs):", 1)
    return line


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
