"""References of a site measured on its own node (``topobind calibrate``): the figures of
ReFrame's run report, one reference and tolerance per figure, the node's load while it was
measured, and the ``references.yaml`` document.

The rule (docs/site-admins.md, "How calibrate sets references"): every reference written is a
limit that a bad node can cross.

- rates (MB/s, GFLOP/s, efficiency %): reference = the median of the sessions; the lower
  bound is ``-max(FLOOR, 3 x (median - min) / median)``, at most -90 % (a rate can only fall
  to 0, so -100 % would accept anything); the upper bound ``+max(FLOOR, 3 x (max - median) /
  median)``, at most ``max(50 %, FLOOR)``: open (none) when the node was busy, since a node
  measured under load is faster when quiet and being faster is no defect.
- latencies (ns): the same spread rule; the upper bound is the one a bad node crosses; the
  lower bound is open when the node was busy.
- variability (% where lower is better: max_slowdown, cv, frac_slower_5pct): pass while the
  value is at most ``min(CAP, max(FLOOR, 2 x the worst session))``; the CAP keeps every limit
  below what the metric can reach (frac_slower_5pct can reach only 50 %: no more than half of
  the repetitions lie below their median). On a busy node no variability reference is
  written: the spread of its repetitions measures the neighbours, not the node.

A node is *busy* when other processes used more than ``BUSY_SHARE`` of its CPU time while
the checks ran (:mod:`topobind.validation.load`, the one rule): ``/proc/stat``'s busy time of all
CPUs minus the CPU time of calibrate's own process tree (ReFrame and the jobs it ran on this
host).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from topobind.errors import TopobindError
from topobind.measure import stats
from topobind.validation.load import Load
from topobind.validation.sites import CHECKS, REFERENCES_SCHEMA_ID, CheckSpec, MetricSpec, Site

VARIABILITY_FLOORS = {"max_slowdown": 10.0, "cv": 5.0, "frac_slower_5pct": 20.0}
VARIABILITY_CAPS = {"max_slowdown": 50.0, "cv": 25.0, "frac_slower_5pct": 40.0}
TOLERANCE_CAP_LOW = 0.9  # a lower bound of -100 % would accept anything
TOLERANCE_CAP_HIGH = 0.5  # unless --min-tolerance is larger


# --------------------------------------------------------------------------- figures
def _class_map() -> dict[str, CheckSpec]:
    return {spec.reframe_class: spec for spec in CHECKS.values()}


def figure_key(testcase_name: str, variant: str, metric: str) -> tuple[str, str, str] | None:
    """(check, variant, metric) of a figure of ReFrame test ``testcase_name`` (its class name
    first), or None when it is not a registered figure."""
    spec = _class_map().get(testcase_name.split(" %")[0])
    if spec is None or metric not in spec.metrics:
        return None
    return spec.name, (variant if spec.parameter else spec.variants[0]), metric


def collect(testcases: Sequence[Any]) -> dict[tuple[str, str, str], list[float]]:
    """Values of every registered figure: {(check, variant, metric): [one per session]}
    (test cases as :mod:`topobind.validation.reframe_report` reads them: the same check, variant
    and node as validate and --each-node see)."""
    from topobind.validation.reframe_report import cases_of

    out: dict[tuple[str, str, str], list[float]] = {}
    for tc in cases_of(testcases):
        if not tc.passed:
            continue
        for f in tc.figures:
            key = figure_key(tc.check, tc.variant, f.metric)
            if key is not None:
                out.setdefault(key, []).append(f.value)
    return out


def is_variability(spec: MetricSpec) -> bool:
    return spec.unit == "%" and not spec.higher_is_better


@dataclass(frozen=True)
class Derived:
    reference: float
    lower: float | None
    upper: float | None
    spread: dict[str, float]


def derive_target(
    check: str, metric: str, values: list[float], floor: float, busy: bool = False
) -> Derived | None:
    """Reference and tolerance of a figure from its per-session values (module docstring);
    None for a variability figure measured on a busy node."""
    spec = CHECKS[check].metrics[metric]
    med = stats.median(values)
    spread = {"min": min(values), "median": med, "max": max(values)}
    if is_variability(spec):
        if busy:
            return None
        ref = max(2.0 * max(values), VARIABILITY_FLOORS.get(metric, 10.0))
        ref = min(ref, VARIABILITY_CAPS.get(metric, ref))
        return Derived(round(ref, 3), -1.0, 0.0, spread)
    if med <= 0:
        raise TopobindError(f"{check} {metric}: median {med} is not positive; cannot calibrate")
    bad_side = max(floor, 3 * ((med - min(values)) if spec.higher_is_better else
                               (max(values) - med)) / med)  # fmt: skip
    good_side = max(floor, 3 * ((max(values) - med) if spec.higher_is_better else
                                (med - min(values))) / med)  # fmt: skip
    cap_high = max(TOLERANCE_CAP_HIGH, floor)
    if spec.higher_is_better:
        lower: float | None = -min(TOLERANCE_CAP_LOW, bad_side)
        upper: float | None = None if busy else min(cap_high, good_side)
    else:
        lower = None if busy else -min(TOLERANCE_CAP_LOW, good_side)
        upper = min(cap_high, bad_side)
    return Derived(
        round(med, 4),
        None if lower is None else round(lower, 3),
        None if upper is None else round(upper, 3),
        spread,
    )


def crossable(spec: MetricSpec, reference: float, lower: float | None, upper: float | None) -> bool:
    """Whether a value the metric can take lies outside the accepted band."""
    low = -math.inf if lower is None else reference * (1 + lower)
    high = math.inf if upper is None else reference * (1 + upper)
    top = math.inf if spec.maximum is None else spec.maximum
    return low > 0 or high < top


def tolerance_rule(floor: float) -> str:
    return (
        f"rates: -max({floor:g}, 3 x (median-min)/median) (at most -{TOLERANCE_CAP_LOW:g}) .. "
        f"+max({floor:g}, 3 x (max-median)/median) (at most "
        f"{max(TOLERANCE_CAP_HIGH, floor):g}; open when busy); latencies: the same with the "
        "sides swapped; variability (%): 0 .. min(cap, max(floor, 2 x worst)), caps "
        + ", ".join(f"{k} {v:g}" for k, v in VARIABILITY_CAPS.items())
        + " (not written when busy)"
    )


# --------------------------------------------------------------------------- node
def node_from(testcases: Sequence[Any]) -> dict[str, Any] | None:
    """The node's counts as the NodeCheck's ``topobind show`` saw them."""
    from topobind.validation.reframe_report import cases_of

    for tc in reversed(cases_of(testcases)):
        if tc.check == "NodeCheck" and tc.passed and tc.outputdir:
            path = Path(tc.outputdir) / "node.json"
            try:
                s = json.loads(path.read_text())["summary"]
                return {
                    "packages": s["packages"],
                    "numa_nodes": len(s["numa_nodes"]),
                    "l3_domains": s["l3_domains"],
                    "cores": s["cores"],
                    "smt": s["smt"],
                    "description": f"{s.get('hostname')} as topobind show saw it",
                }
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return None


def nominal_peak(cores: int, cpuinfo: str = "/proc/cpuinfo") -> tuple[float, str] | None:
    """Nominal double-precision peak of this machine: cores x GHz x flop/cycle by ISA."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None

    def field(name: str) -> str:
        m = re.search(rf"^{name}\s*:\s*(.*)$", text, re.M)
        return m.group(1) if m else ""

    flags = set(field("flags").split())
    ghz: float | None = None
    m = re.search(r"@\s*([\d.]+)\s*GHz", field("model name"))
    if m:
        ghz = float(m.group(1))
    elif field("cpu MHz"):
        ghz = float(field("cpu MHz")) / 1000
    if not ghz:
        return None
    if "avx512f" in flags:
        fpc, isa = 32, "AVX-512, 2 FMA units assumed"
    elif "fma" in flags and "avx2" in flags:
        fpc, isa = 16, "AVX2 + FMA"
    elif "avx" in flags:
        fpc, isa = 8, "AVX"
    else:
        fpc, isa = 4, "SSE2"
    return cores * ghz * fpc, f"nominal: {cores} cores x {ghz:g} GHz x {fpc} flop/cycle ({isa})"


def record_node(
    site: Site, partition: str, measured: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The node: section of references.yaml: the measured counts when the site describes no
    node, plus a nominal peak (for HPL efficiency) when the site gives none and the checks
    ran on this very machine."""
    if measured is None:
        return None
    here = site.partition(partition).scheduler == "local" or site.name == "local"
    peak = nominal_peak(measured["cores"]) if here else None
    counts = ("packages", "numa_nodes", "l3_domains", "cores", "smt")
    if site.node is None:
        node = dict(measured)
    elif not site.node.peak_gflops and peak:
        node = {k: getattr(site.node, k) for k in counts}
    else:
        return None
    note = "counts from topobind show on the partition's node"
    if peak and not (site.node and site.node.peak_gflops):
        node["peak_gflops"] = round(peak[0], 1)
        note += f"; peak_gflops {peak[1]}"
    node["provenance"] = {
        "kind": "measured",
        "date": dt.date.today().isoformat(),
        "method": "calibration",
        "host": socket.gethostname(),
        "note": note,
    }
    return node


# --------------------------------------------------------------------------- the file
@dataclass(frozen=True)
class CalibrationRun:
    site: Site
    values: dict[tuple[str, str, str], list[float]]
    runs: int
    floor: float
    partition: str
    tags: str
    settings: dict[str, str]
    node: dict[str, Any] | None
    command: str
    load: Load | None = None

    @property
    def busy(self) -> bool:
        return self.load is not None and self.load.busy

    def derived(self) -> dict[tuple[str, str, str], Derived | None]:
        return {
            key: derive_target(key[0], key[2], vals, self.floor, self.busy)
            for key, vals in sorted(self.values.items())
        }


def references_yaml(cal: CalibrationRun) -> str:

    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    date = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    host = socket.gethostname()
    targets: dict[str, Any] = {}
    for (check, variant, metric), d in cal.derived().items():
        if d is None:
            continue
        provenance: dict[str, Any] = {
            "kind": "measured",
            "date": date,
            "method": "calibration",
            "host": host,
            "runs": len(cal.values[(check, variant, metric)]),
            "spread": {k: round(v, 4) for k, v in d.spread.items()},
        }
        if cal.busy and cal.load is not None:
            provenance["note"] = f"calibrated on a busy node: {cal.load.text()}"
        targets.setdefault(check, {}).setdefault(variant, {})[metric] = {
            "reference": d.reference,
            "tolerance": {"lower": d.lower, "upper": d.upper},
            "unit": CHECKS[check].metrics[metric].unit,
            "provenance": provenance,
        }
    calibration: dict[str, Any] = {
        "date": date,
        "host": host,
        "method": "calibration",
        "runs": cal.runs,
        "partition": cal.partition,
        "tags": cal.tags,
        "command": cal.command,
        "settings": {k: v for k, v in cal.settings.items() if k != "calibrating"},
        "tolerance_rule": tolerance_rule(cal.floor),
    }
    if cal.load is not None:
        calibration["load"] = cal.load.as_doc()
    doc: dict[str, Any] = {
        "schema": REFERENCES_SCHEMA_ID,
        "site": cal.site.name,
        "calibration": calibration,
    }
    if cal.node is not None:
        doc["node"] = cal.node
    doc["targets"] = targets
    header = (
        f"# Written by '{cal.command}' on {date} (host {host}).\n"
        f"# Measured references of site {cal.site.name}; topobind validate compares against "
        "them.\n"
        "# Re-run calibrate to refresh them: hand edits are overwritten (quoted targets belong\n"
        "# in site.yaml, which this file overrides figure by figure).\n"
    )
    if cal.busy and cal.load is not None:
        header += (
            f"# BUSY NODE: {cal.load.text()}; rates have no upper bound, latencies no lower\n"
            "# one, and no variability reference was written. Calibrate again on a quiet node.\n"
        )
    return header + yaml.safe_dump(doc, sort_keys=False, width=100)


def write_references(cal: CalibrationRun) -> Path:
    """Write ``cal``'s references file atomically, after checking it with the rules a reader
    applies (the references schema); returns its path."""
    from topobind.fsutil import atomic_write_text
    from topobind.validation.sites import schema_problems

    path = cal.site.references_path
    if path is None:
        raise TopobindError(f"{cal.site.path}: has no 'references:' key")
    text = references_yaml(cal)
    problems = schema_problems(yaml.safe_load(text), str(path), "references")
    if problems:
        raise TopobindError("internal: calibrate produced an invalid file: " + problems[0])
    Path(path).parent.mkdir(parents=True, exist_ok=True)  # the user's folder, for a shipped site
    atomic_write_text(path, text)
    return Path(path)
