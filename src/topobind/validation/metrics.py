"""Verdicts as Prometheus metrics: the text exposition format, written atomically for
node_exporter's textfile collector (``--collector.textfile.directory``).

One file per run (``validate [--each-node] --metrics FILE``, ``site check --live --metrics
FILE``); the
collector reads every ``*.prom`` file of its directory on each scrape, so the file is written
to a temporary name in the same directory and renamed over the old one: a scrape never sees
half a file. Names follow the Prometheus conventions: the ``topobind_`` prefix, base units in
the name (bytes per second, seconds, ratios), gauges only.

Per node: ``topobind_node_verdict{verdict="ok|slow|fail|nonconforming|not_judged|not_tested"}``
(1 for the node's verdict, 0 for the others: an alert compares with 1; not_judged: too few
nodes or runs to judge, not_tested: not in the reports judged, or its job never started) and
``topobind_node_verdict_strong``.
Per node and figure: the measured value and the reference in the unit's base unit, the ratio
measured/reference, the runs, the verdict's strength (1 strong, 0 weak) and the sign test's
confidence. Per file: the time of the run (``topobind_run_timestamp_seconds``).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError
from topobind.fsutil import output_file

VERDICTS = ("ok", "slow", "fail", "nonconforming", "not_judged", "not_tested")

#: unit -> (quantity in the metric name, base unit in the name, factor to the base unit)
UNITS: dict[str, tuple[str, str, float]] = {
    "MB/s": ("bandwidth", "bytes_per_second", 1e6),
    "GB/s": ("bandwidth", "bytes_per_second", 1e9),
    "GFLOP/s": ("compute", "flops", 1e9),
    "ns": ("latency", "seconds", 1e-9),
    "us": ("latency", "seconds", 1e-6),
    "s": ("time", "seconds", 1.0),
    "%": ("share", "ratio", 0.01),
}


@dataclass(frozen=True)
class NodeMetric:
    node: str
    verdict: str  # one of VERDICTS
    strong: bool = True
    #: the verdict's causes, ranked (topobind.measure.causes: throttled, busy, ...,
    #: unexplained, unknown; slurm for a job that never started or died)
    causes: tuple[str, ...] = ()


@dataclass(frozen=True)
class FigureMetric:
    node: str
    check: str
    variant: str
    metric: str
    unit: str
    value: float
    reference: float | None  # the site's reference, or the fleet median (--each-node)
    runs: int
    strong: bool
    confidence: float | None = None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Sequence[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in pairs) + "}"


def _num(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x))


class _Family:
    """One metric family: HELP, TYPE and its samples, kept in order."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help, self.samples = name, help_text, []  # type: list[str]

    def add(self, labels: Sequence[tuple[str, str]], value: float) -> None:
        self.samples.append(f"{self.name}{_labels(labels)} {_num(value)}")

    def text(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} gauge", *self.samples]


def render(
    nodes: Iterable[NodeMetric],
    figures: Iterable[FigureMetric],
    *,
    site: str,
    partition: str,
    when: float | None = None,
    site_problems: Sequence[tuple[str, str, int]] = (),
) -> str:
    """The Prometheus text format of one run's verdicts; ``site_problems``: (check, variant,
    nodes it failed on) of each failure the fleet shared (validation.site_problems)."""
    base = [("site", site), ("partition", partition)]
    fams: dict[str, _Family] = {}

    def fam(name: str, help_text: str) -> _Family:
        return fams.setdefault(name, _Family(f"topobind_{name}", help_text))

    run = fam("run_timestamp_seconds", "When the checks behind these verdicts ran (Unix time).")
    run.add(base, time.time() if when is None else when)
    for n in nodes:
        if n.verdict not in VERDICTS:
            raise TopobindError(f"metrics: verdict {n.verdict!r} is not one of {VERDICTS}")
        v = fam("node_verdict", "The node's verdict: 1 for its verdict label, 0 for the others.")
        for state in VERDICTS:
            v.add([*base, ("node", n.node), ("verdict", state)], float(n.verdict == state))
        s = fam("node_verdict_strong", "1 when the node's verdict is strong, 0 when weak.")
        s.add([*base, ("node", n.node)], float(n.strong))
        for rank, cause in enumerate(n.causes, 1):
            c = fam("node_cause", "The cause of a SLOW, FAIL, NOT STARTED or UNREACHABLE "
                    "verdict (docs/explanation/causes.md), by rank: 1 the first.")  # fmt: skip
            c.add([*base, ("node", n.node), ("cause", cause)], float(rank))
    for check, variant, failed in site_problems:
        p = fam("site_problem", "A failure most judged nodes shared (the site's, not a "
                "node's; nothing drained): the nodes it failed on.")  # fmt: skip
        p.add([*base, ("check", check), ("variant", variant)], float(failed))
    for f in figures:
        _add_figure(fam, base, f)
    out = [line for f in fams.values() for line in f.text()]
    return "\n".join(out) + "\n"


def _add_figure(fam, base: list[tuple[str, str]], f: FigureMetric) -> None:  # noqa: ANN001
    quantity, unit, factor = UNITS.get(f.unit, ("value", "", 1.0))
    suffix = f"{quantity}_{unit}" if unit else quantity
    labels = [*base, ("node", f.node), ("check", f.check), ("variant", f.variant),
              ("metric", f.metric)]  # fmt: skip
    if not unit:
        labels.append(("unit", f.unit))
    what = f"{quantity} in {unit.replace('_', ' ')}" if unit else f"value ({f.unit})"
    fam(f"check_{suffix}", f"The measured figure: {what}.").add(labels, f.value * factor)
    if f.reference is not None:
        ref = fam(f"check_reference_{suffix}", f"The figure's reference: {what}.")
        ref.add(labels, f.reference * factor)
        if f.reference:
            fam("check_ratio", "Measured / reference (1: as the reference).").add(
                labels, f.value / f.reference
            )
    fam("check_runs", "Runs behind the figure.").add(labels, float(f.runs))
    fam("check_verdict_strong", "1 when the figure's verdict is strong, 0 when weak.").add(
        labels, float(f.strong)
    )
    if f.confidence is not None:
        fam("check_confidence_ratio", "The sign test's confidence in the verdict (0 to 1).").add(
            labels, f.confidence
        )


def check_path(path: str | os.PathLike[str]) -> Path:
    """``path`` if it can take the metrics (a ``*.prom`` file, under the rule of every output
    of topobind: :func:`topobind.fsutil.output_file`, a directory that takes a new file);
    checked before a run, so a long run does not end on a bad name or a read-only place."""
    dest = Path(path)
    if os.fspath(path) not in ("", "-") and dest.is_dir():
        raise TopobindError(
            f"--metrics {dest}: a directory; give a file, e.g. {dest}/topobind.prom"
        )
    output_file(path, "--metrics")
    if dest.suffix != ".prom":
        raise TopobindError(
            f"--metrics {dest}: node_exporter's textfile collector reads only *.prom files; "
            f"name it {dest.with_suffix('.prom').name}"
        )
    return dest


def write(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically (a temporary file in the same directory, renamed
    over it), readable by the collector (mode 0644); checked again first (the rule of every
    output), and a write that fails now (a full disk) is one line, the old file kept."""
    dest = check_path(path)
    tmp = ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except OSError as exc:
        raise TopobindError(f"--metrics {dest}: cannot write it ({exc.strerror or exc})") from None
    finally:
        if tmp and os.path.lexists(tmp):
            os.unlink(tmp)
    return dest


# --------------------------------------------------------------------------- from verdicts
HIGHER_IS_BETTER = {"MB/s": True, "GB/s": True, "GFLOP/s": True, "ns": False, "us": False,
                    "s": False}  # fmt: skip


def from_each_node(
    verdicts: Iterable[Any], figures: Iterable[Any], failures: Iterable[Any] = ()
) -> tuple[list[NodeMetric], list[FigureMetric]]:
    """Metrics of a ``validate --each-node`` outcome (:mod:`topobind.validation.verdict`'s
    NodeVerdict and FigureVerdict): a node with a conformance failure is ``nonconforming``;
    a figure's reference is the fleet median (the figure's median against its slowdown)."""
    nonconforming = {f.node for f in failures if f.check == "conformance"}
    nodes = []
    for v in verdicts:
        states = {
            "ok": "ok",
            "SLOW": "slow",
            "NOT JUDGED": "not_judged",
            "not tested": "not_tested",
            "NOT STARTED": "not_tested",  # its job never started (one job a node): no verdict
        }
        state = states.get(v.status, "fail")
        if v.node in nonconforming:
            state = "nonconforming"
        strong = not v.weak or v.confirmed.startswith("confirmed")  # 'confirmed against N'
        nodes.append(
            NodeMetric(
                v.node,
                state,
                strong and state not in ("not_judged", "not_tested"),
                tuple(getattr(v, "cause_labels", ())),
            )  # fmt: skip
        )
    out = []
    for f in figures:
        hib = HIGHER_IS_BETTER.get(f.unit)
        ref = None
        if hib is not None and f.median > 0:
            ref = f.median * (1 + f.slowdown) if hib else f.median / (1 + f.slowdown)
        strong = not f.weak and not f.not_judged  # a figure not judged is no strong verdict
        out.append(FigureMetric(f.node, f.check, f.variant, f.metric, f.unit, f.median, ref,
                                f.runs, strong, f.confidence))  # fmt: skip
    return nodes, out


def from_validate(testcases: Iterable[Any], host: str) -> tuple[list[NodeMetric],
                                                                   list[FigureMetric]]:  # fmt: skip
    """Metrics of a plain ``validate`` (the final test cases of its ReFrame sessions,
    :class:`topobind.validation.reframe_report.TestCase`): per node (``host`` where a case ran on
    this machine) ``fail`` when a check failed before its figures (sanity, a crash), ``slow``
    when a figure missed its reference, ``not_judged`` when its figures had no reference to
    miss (and no sanity-only check ran), else ``ok``; each figure against the site's reference.
    One run per check: a figure's verdict is weak (strong needs MIN_RUNS runs), and so is a
    ``slow`` node's (``validate --each-node --confirm`` confirms it); a sanity failure is not
    a matter of runs (strong)."""
    from topobind.measure.stats import MIN_RUNS

    states: dict[str, str] = {}
    judged: set[str] = set()  # nodes with a check that was held against something
    out: list[FigureMetric] = []
    rank = {"ok": 0, "slow": 1, "fail": 2}
    for tc in testcases:
        if tc.result == "skip":
            continue
        node = tc.node or host
        state = "ok"
        if tc.result != "pass":
            state = "slow" if tc.fail_phase == "performance" and tc.figures else "fail"
        if state != "ok" or not tc.figures or any(f.has_reference for f in tc.figures):
            judged.add(node)  # a sanity-only check judges; figures without a reference do not
        if rank[state] >= rank[states.get(node, "ok")]:
            states[node] = state
        for f in tc.figures:
            ref = f.reference if f.has_reference else None
            out.append(FigureMetric(node, tc.check, tc.variant, f.metric, f.unit, f.value, ref,
                                    1, MIN_RUNS <= 1, None))  # fmt: skip
    nodes = [NodeMetric(n, v if n in judged else "not_judged", v != "slow" and n in judged)
             for n, v in states.items()]  # fmt: skip
    return nodes, out


def from_conformance(node: str, findings: Sequence[str]) -> list[NodeMetric]:
    """``site check --live``: the node conforms (ok) or not (nonconforming)."""
    return [NodeMetric(node, "nonconforming" if findings else "ok", True)]
