"""Why a node is slow: the cause of a verdict, from the node's own evidence against the
fleet's (issue 45; docs/explanation/causes.md).

The evidence is the ``evidence`` section of a result document (``topobind.result/1``,
docs/results-format.md): signals read around the measured run (cgroup throttling, other
processes' share of the run's CPUs, steal, NUMA placement of the pages, vmstat deltas,
interrupts, clocks, ...) and hardware counters where the node has them. :func:`signals_of`
turns one document's section into plain numbers, each the same quantity on every node
(counts over the run's window become rates a second; a link or a GPU becomes a count of
degraded links or throttled GPUs).

The rule of evidence (:func:`explain`): a signal names its cause only when the node's runs
lie outside the fleet's by the same noise rule that judges the figures
(:func:`topobind.measure.stats.outliers`: the node's median beyond the fleet median by more
than max(threshold, the fleet's run-to-run CV), and a sign test over the node's runs at
:data:`topobind.measure.stats.NAME_CONFIDENCE`), with at least :data:`MIN_NODES` nodes and
:data:`MIN_RUNS` runs of the node carrying that signal. Signals that are shares or counts
near zero on a quiet node are compared after adding their resolution (:attr:`Signal.floor`:
0.02 of a share, 1 event a second ...), so that 0 against 0.001 is no cause and 0.71 against
0 is. Several causes are ranked by how far outside the fleet their signal lies. No signal
outside: "unexplained: no signal outside the fleet's range"; no evidence at all: "unknown (no
evidence: REASON)".

Pure: no file is read here (validation/ and report/ hand in the documents they read).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topobind.measure import stats

MIN_NODES = 3  # a fleet median with a majority (validation.verdict.MIN_NODES)
MIN_RUNS = 3  # the fewest runs a sign test names an outlier with (3 of 3: 0.875)
MAX_SIGNALS = 64  # numbers taken from one document's signals (a hostile one may hold more)
#: GPU clock-throttle reasons that are no slowdown of the GPU's own (NVML's idle and
#: application-clock reasons)
GPU_IDLE_REASONS = frozenset({"gpu_idle", "applications_clocks_setting", "none", "idle"})


@dataclass(frozen=True, slots=True)
class Signal:
    key: str  # the name in the evidence's signals (or a derived one: see signals_of)
    cause: str  # the cause it names
    higher_is_worse: bool
    floor: float  # its resolution, added to every value before the rule
    rate: bool  # a count over the run's window, compared a second
    text: str  # how a value is said ({v}: the value)

    def value(self, v: float) -> str:
        """The value alone, in the text's format ('71%', '3.2e+04')."""
        spec = self.text.split("{v:", 1)[1].split("}", 1)[0]
        return format(v, spec)


#: the documented signals, by cause (docs/explanation/causes.md)
SIGNALS: tuple[Signal, ...] = (
    Signal("throttled_share", "throttled", True, 0.02, False,
           "throttled {v:.0%} of the run"),
    Signal("thermal_throttle_events", "throttled", True, 1.0, True,
           "{v:.3g} thermal throttle events/s"),
    Signal("effective_clock_ratio", "throttled", False, 0.0, False,
           "effective clock {v:.2f} of nominal"),
    Signal("busy_share", "busy", True, 0.02, False,
           "other processes {v:.0%} of its CPUs"),
    Signal("steal_share", "stolen", True, 0.02, False,
           "hypervisor steal {v:.0%} of its CPUs"),
    Signal("remote_page_share", "memory off-node", True, 0.02, False,
           "{v:.0%} of its pages on other NUMA nodes"),
    Signal("numa_miss", "memory off-node", True, 100.0, True,
           "numa_miss {v:.3g} pages/s"),
    Signal("thp_fault_fallback", "pages", True, 1.0, True,
           "THP fallbacks {v:.3g}/s"),
    Signal("compact_stall", "pages", True, 1.0, True,
           "compaction stalls {v:.3g}/s"),
    Signal("dram_bytes", "memory traffic", True, 0.0, False,
           "DRAM traffic {v:.3g} bytes a run"),
    Signal("l2_lines_in", "memory traffic", True, 0.0, False,
           "L2 lines in {v:.3g} a run"),
    Signal("interrupts_on_cpus", "interrupts", True, 100.0, True,
           "{v:.3g} interrupts/s on its CPUs"),
    Signal("swap_pages", "swap", True, 1.0, True,
           "{v:.3g} pages swapped/s"),
    Signal("links_degraded", "link degraded", True, 0.5, False,
           "{v:.0f} PCIe link(s) below their width or speed"),
    Signal("gpus_throttled", "GPU throttled", True, 0.5, False,
           "{v:.0f} GPU(s) clock-throttled"),
)  # fmt: skip
BY_KEY = {s.key: s for s in SIGNALS}

UNEXPLAINED = "unexplained: no signal outside the fleet's range"


@dataclass(frozen=True, slots=True)
class Cause:
    name: str  # throttled, busy, ...
    signal: str
    value: float  # the node's median
    fleet: float  # the fleet's median
    excess: float  # how far outside: stats.slowdown of the (floored) medians
    detail: str = ""  # said first, e.g. "cgroup quota 0.25 CPUs"
    fleet_detail: str = ""  # the fleet's, e.g. "no quota"

    def text(self) -> str:
        """'throttled (cgroup quota 0.25 CPUs, throttled 71% of the run; fleet: no quota,
        none)': the node's figure, then the fleet's median."""
        sig = BY_KEY[self.signal]
        fleet = sig.value(self.fleet) if self.fleet > 0 else "none"
        mine = ", ".join(t for t in (self.detail, sig.text.format(v=self.value)) if t)
        theirs = ", ".join(t for t in (self.fleet_detail, fleet) if t)
        return f"{self.name} ({mine}; fleet: {theirs})"


@dataclass(frozen=True, slots=True)
class Explanation:
    causes: tuple[Cause, ...]  # ranked, one a cause name
    text: str  # 'throttled (...); busy (...)', UNEXPLAINED, 'unknown (no evidence: ...)'

    @property
    def label(self) -> str:
        """The metrics' cause label: the first cause's name, 'unexplained' or 'unknown'."""
        if self.causes:
            return self.causes[0].name
        return "unexplained" if self.text == UNEXPLAINED else "unknown"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) and v >= 0 else None


def signals_of(document: object) -> tuple[dict[str, float], str]:
    """(signal -> number, '') of a result document's ``evidence`` section, or ({}, why) when
    it has none or none is usable; never raises on a malformed section."""
    if not isinstance(document, Mapping):
        return {}, "not a result document"
    ev = document.get("evidence")
    if ev is None:
        return {}, "the result document has no evidence section"
    if not isinstance(ev, Mapping) or ev.get("version") != 1:
        return {}, "its evidence section is not version 1"
    window = _number(ev.get("window_s"))
    raw = ev.get("signals")
    out: dict[str, float] = {}
    if isinstance(raw, Mapping):
        for key, value in list(raw.items())[:MAX_SIGNALS]:
            v, sig = _number(value), BY_KEY.get(str(key))
            if v is None:
                continue
            if sig is not None and sig.rate:
                if not window:
                    continue
                v /= window
                if not math.isfinite(v):  # a window of 1e-320 s
                    continue
            out[str(key)] = v
    _counters(ev.get("counters"), out)
    _devices(ev, out)
    if not out:
        why = ev.get("unavailable")
        first = next(iter(why.values()), "") if isinstance(why, Mapping) and why else ""
        return {}, str(first)[:120] or "its evidence section holds no signal"
    return out, ""


def _counters(counters: object, out: dict[str, float]) -> None:
    if not isinstance(counters, Mapping) or counters.get("available") is not True:
        return
    events = counters.get("events")
    if isinstance(events, Mapping):
        lines = _number(events.get("l2_lines_in"))
        if lines is not None:
            out["l2_lines_in"] = lines
    dram = counters.get("dram_bytes")
    if isinstance(dram, Mapping):
        parts = [_number(dram.get(k)) for k in ("read", "write")]
        total = sum(p for p in parts if p is not None)
        if all(p is not None for p in parts) and math.isfinite(total):
            out["dram_bytes"] = total


def _devices(ev: Mapping[str, object], out: dict[str, float]) -> None:
    links = ev.get("links")
    if isinstance(links, list):
        out["links_degraded"] = float(sum(1 for ln in links[:MAX_SIGNALS]
                                          if isinstance(ln, Mapping)
                                          and ln.get("degraded") is True))  # fmt: skip
    gpus = ev.get("gpu_throttle")
    if isinstance(gpus, list):
        throttled = [g for g in gpus[:MAX_SIGNALS] if isinstance(g, Mapping)
                     and isinstance(g.get("reasons"), list)
                     and set(map(str, g["reasons"])) - GPU_IDLE_REASONS]  # fmt: skip
        out["gpus_throttled"] = float(len(throttled))


def explain(node: str, runs: Mapping[str, Sequence[Mapping[str, float]]], threshold: float,
            why_none: str = "") -> Explanation:  # fmt: skip
    """The cause of ``node``'s verdict: ``runs`` holds every node's signals a run
    (:func:`signals_of`) of the same check and variant; ``why_none``: why the node has no
    evidence (said when it has none)."""
    return explain_each((node,), runs, threshold, {node: why_none})[node]


def explain_each(
    nodes: Sequence[str],
    runs: Mapping[str, Sequence[Mapping[str, float]]],
    threshold: float,
    why_none: Mapping[str, str],
) -> dict[str, Explanation]:
    """:func:`explain` for each of ``nodes`` against the same ``runs``: each signal's outlier
    rule is computed once for the fleet, not once a node (a report of 5,000 hosts names the
    causes of every slow one)."""
    judged: dict[str, int] = dict.fromkeys(nodes, 0)
    found: dict[str, dict[str, Cause]] = {n: {} for n in nodes}
    mine = {n: [r for r in runs.get(n, ()) if r] for n in nodes}
    for sig in SIGNALS:
        by_node = {n: [v[sig.key] + sig.floor for v in rs if sig.key in v and v[sig.key] +
                       sig.floor > 0] for n, rs in runs.items()}  # fmt: skip
        by_node = {n: v for n, v in by_node.items() if v}
        these = [n for n in nodes if mine[n] and len(by_node.get(n, ())) >= MIN_RUNS]
        if len(by_node) < MIN_NODES or not these:
            continue
        out = stats.outliers(by_node, threshold, not sig.higher_is_worse)
        for node in these:
            judged[node] += 1
            o = out[node]
            if not o.outside:
                continue
            cause = Cause(sig.cause, sig.key, o.median - sig.floor, o.fleet - sig.floor,
                          o.slowdown, *_detail(sig, mine[node], runs, node))  # fmt: skip
            if sig.cause not in found[node] or cause.excess > found[node][sig.cause].excess:
                found[node][sig.cause] = cause
    return {n: _explanation(mine[n], found[n], judged[n], why_none.get(n, "")) for n in nodes}


def _explanation(mine: Sequence[Mapping[str, float]], found: Mapping[str, Cause], judged: int,
                 why_none: str) -> Explanation:  # fmt: skip
    if not mine:
        return Explanation((), f"unknown (no evidence: {why_none or 'no run of it carried any'})")
    ranked = tuple(sorted(found.values(), key=lambda c: -c.excess))
    if ranked:
        return Explanation(ranked, "; ".join(c.text() for c in ranked))
    if not judged:
        return Explanation((), f"not judged: fewer than {MIN_NODES} nodes or {MIN_RUNS} runs "
                               "carried evidence")  # fmt: skip
    return Explanation((), UNEXPLAINED)


def _detail(sig: Signal, mine: Sequence[Mapping[str, float]],
            runs: Mapping[str, Sequence[Mapping[str, float]]],
            node: str) -> tuple[str, str]:  # fmt: skip
    """The context said with a cause, the node's and the fleet's: the cgroup CPU quota
    (quota_cpus, absent when unlimited) of a throttled node."""
    if sig.key != "throttled_share":
        return "", ""
    quotas = [r["quota_cpus"] for r in mine if "quota_cpus" in r]
    others = [r["quota_cpus"] for n, rs in runs.items() if n != node for r in rs
              if "quota_cpus" in r]  # fmt: skip
    limited = sum(1 for n, rs in runs.items() if n != node and any("quota_cpus" in r for r in rs))
    mine_text = f"cgroup quota {stats.median(quotas):.3g} CPUs" if quotas else ""
    fleet = (f"quota {stats.median(others):.3g} CPUs" if 2 * limited > len(runs) - 1
             else "no quota")  # fmt: skip
    return mine_text, fleet
