"""Generator of SYNTHETIC fleets of kernel results (for tests, demos and the report benchmark).

Everything it writes is clearly marked as generated: every result has
``"params": {"generated": true, "generator": "tests/fleetgen.py", ...}``, host names are
``gen-node0001``, ``gen-node0002``, ... and the validation text says "generated". None of it
was measured on a machine.

The model (documented in docs/report.md):

- a generated node has 2 packages, 4 NUMA nodes, 8 L3 domains, 64 cores (8 per L3 domain)
  and 2 PUs per core, recorded in every result as ``params.topology`` (hwloc synthetic
  description ``pack:2 numa:2 l3:2 core:8 pu:2(indexes=2*64:1*2)``); STREAM, DGEMM and HPL
  run 64 threads, one per core (OS indexes 0-63), latency 1 thread and c2c 2;
- ``--layout L`` records L in every result; for a layout topobind plans (compact, per-l3,
  ...) STREAM, DGEMM and HPL record that layout's default placement on the generated node
  (R ranks x T threads, every rank in one result's ``placement``), so the report draws it;
  other names keep one rank on cores 0-63;
- each kernel has a typical value (STREAM triad ~240,000 MB/s, DGEMM ~2,200 GFLOP/s, HPL
  ~1,900 GFLOP/s, memory latency at 1 GiB ~105 ns, core-to-core median over CPU pairs ~185 ns);
- every host has its own small, permanent offset (log-normal, sd 0.7 %), every run its own
  noise (sd 0.8-1.5 % depending on the kernel), and 3 % of runs are hit by interference that
  makes them 5-25 % slower (the long tail real fleets show);
- ``--slow HOST:FACTOR[:KERNEL]`` makes a host slower by a known factor: 1.12 means the same
  work takes 12 % longer (bandwidth and GFLOP/s divided by 1.12, latency multiplied by 1.12),
  for every kernel or only the named one; the factor is recorded as
  ``params.injected_slowdown``;
- page sizes change the figures the way they do on real nodes (4 KiB pages: memory latency
  ~30 % worse, STREAM ~3 % worse; 1 GiB pages slightly better than 2 MiB).
- ``--evidence software|counters`` writes an ``evidence`` section into every kernel result
  (docs/results-format.md): quiet signals (other processes ~0.5 % of the CPUs, no steal, no
  throttling, ~0.1 % remote pages); ``software``: the counters of a VM without a PMU
  (context switches, migrations, faults; ``l2_lines_in`` missing, and why); ``counters``:
  a node with a PMU, ``l2_lines_in`` ~1.1 lines a 64-byte line of STREAM's work (run sd 3 %)
  and DRAM read and write bytes;
- ``--cause HOST:traffic`` gives a host McCalpin's signature (1.5-2x the L2 lines in of the
  others and 1.3-1.6x the DRAM read bytes); ``--cause HOST:throttled``: a cgroup quota of
  16 CPUs that throttles 30-50 % of the run. A cause changes only the evidence: give the
  host its slowdown with ``--slow``.

The random generator is seeded: the same arguments give byte-identical files.

    python tests/fleetgen.py --hosts 40 --runs 7 --kernels stream,dgemm,latency \\
        --slow gen-node0007:1.12,gen-node0019:1.15 -o /tmp/fleet
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from topobind.errors import TopobindError

GENERATOR = "tests/fleetgen.py"
HOST_PREFIX = "gen-node"

PAGE_KIB = {"4k": 4, "2M": 2048, "1G": 1048576}

# Generated node: 2 packages x 2 NUMA x 2 L3 x 8 cores, 2 PUs per core; PU OS index = core
# index for the first PU of each core (second PUs are 64-127). Recorded in every result as
# params.topology (hwloc synthetic description), which the report draws layouts on.
TOPOLOGY = "pack:2 numa:2 l3:2 core:8 pu:2(indexes=2*64:1*2)"
CORES = 64
CORES_PER_L3 = 8
CORES_PER_NUMA = 16
CORES_PER_PACKAGE = 32
NUMA_NODES = 4
C2C_CPUS = tuple(range(0, CORES, 4))  # 16 CPUs (OS indexes), two per L3 domain


@dataclass(frozen=True)
class KernelModel:
    """Typical figures of one kernel on the generated node."""

    name: str
    metric: str
    unit: str
    higher_is_better: bool
    stat: str  # which statistic of the trials is the headline
    typical: float  # headline value on 2 MiB pages, healthy host
    run_sd: float  # run-to-run noise (log-normal sd)
    trial_sd: float  # trial-to-trial noise inside one run
    trials: int
    page_time_factor: dict[int, float] = field(default_factory=dict)  # kib -> time factor
    threads: int = CORES


MODELS: dict[str, KernelModel] = {
    m.name: m
    for m in (
        KernelModel(
            "stream", "triad", "MB/s", True, "best", 240_000.0, 0.010, 0.006, 10,
            {4: 1.03, 2048: 1.0, 1048576: 0.995},
        ),
        KernelModel(
            "dgemm", "gflops", "GFLOP/s", True, "median", 2_200.0, 0.008, 0.004, 5,
            {4: 1.01, 2048: 1.0, 1048576: 0.998},
        ),
        KernelModel(
            "hpl", "gflops", "GFLOP/s", True, "best", 1_900.0, 0.010, 0.0, 1,
            {4: 1.02, 2048: 1.0, 1048576: 0.997},
        ),
        KernelModel(
            "latency", "latency_1GiB", "ns", False, "median", 105.0, 0.012, 0.005, 5,
            {4: 1.30, 2048: 1.0, 1048576: 0.93}, threads=1,
        ),
        KernelModel(
            "c2c", "pair_median", "ns", False, "median", 185.0, 0.015, 0.0, 1,
            {}, threads=2,
        ),
    )
}  # fmt: skip
KERNELS = (*MODELS, "whereami")

HOST_SD = 0.007
HICCUP_PROB = 0.03
HICCUP_RANGE = (1.05, 1.25)


def host_name(i: int) -> str:
    """1-based host number -> ``gen-node0001``."""
    return f"{HOST_PREFIX}{i:04d}"


@dataclass(frozen=True)
class FleetSpec:
    hosts: int = 40
    runs: int = 7
    kernels: tuple[str, ...] = ("stream", "dgemm", "latency")
    slow: dict[str, dict[str | None, float]] = field(default_factory=dict)
    pages: tuple[str, ...] = ("2M",)
    layout: str | None = None
    seed: int = 1
    start: datetime = datetime(2026, 11, 1, tzinfo=UTC)
    evidence: str = ""  # "": no evidence section; "software" (a VM) or "counters" (a PMU)
    causes: dict[str, str] = field(default_factory=dict)  # host -> "traffic" | "throttled"


@dataclass(frozen=True)
class FleetWritten:
    directory: Path
    files: int
    results: int
    hosts: tuple[str, ...]
    slow: dict[str, dict[str | None, float]]


def parse_slow(text: str) -> dict[str, dict[str | None, float]]:
    """``gen-node0007:1.12,gen-node0019:1.15:stream`` -> {host: {kernel|None: factor}}."""
    out: dict[str, dict[str | None, float]] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise TopobindError(
                f"--slow item {item!r}: expected HOST:FACTOR or HOST:FACTOR:KERNEL "
                "(e.g. gen-node0007:1.12)"
            )
        try:
            factor = float(parts[1])
        except ValueError:
            raise TopobindError(
                f"--slow item {item!r}: FACTOR must be a number like 1.12"
            ) from None
        if not (factor > 0 and math.isfinite(factor)):
            raise TopobindError(
                f"--slow item {item!r}: FACTOR must be positive (1.12 = 12% slower)"
            )
        kernel = parts[2] if len(parts) == 3 else None
        if kernel is not None and kernel not in MODELS:
            raise TopobindError(f"--slow item {item!r}: unknown kernel {kernel!r}")
        out.setdefault(parts[0], {})[kernel] = factor
    return out


EVIDENCE_MODES = ("", "software", "counters")
CAUSES = ("traffic", "throttled")
NO_PMU = ("no hardware PMU (a VM without a virtual PMU?): hardware events not supported "
          "(ENOENT), no bus/event_source/devices/cpu in sysfs")  # fmt: skip
L2_PER_LINE = 1.1  # L2 lines in per 64-byte line of STREAM's work, a healthy generated node


def parse_causes(text: str) -> dict[str, str]:
    """``gen-node0003:traffic,gen-node0005:throttled`` -> {host: cause}."""
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        host, _, cause = item.partition(":")
        if cause not in CAUSES:
            raise TopobindError(
                f"--cause item {item!r}: expected HOST:CAUSE, CAUSE one of {', '.join(CAUSES)}"
            )
        out[host] = cause
    return out


def _evidence(
    model: KernelModel, params: dict[str, object], mode: str, cause: str | None,
    time_factor: float, rng: random.Random,
) -> dict[str, object]:  # fmt: skip
    """A generated run's evidence section (``mode`` software or counters)."""
    window = round(4.0 * time_factor * math.exp(rng.gauss(0.0, 0.02)), 3)
    throttled = round(rng.uniform(0.3, 0.5), 3) if cause == "throttled" else 0.0
    signals: dict[str, float] = {
        "busy_share": round(rng.uniform(0.0, 0.01), 4), "steal_share": 0.0,
        "throttled_share": throttled, "throttled_periods": int(throttled * window * 10),
        "remote_page_share": round(rng.uniform(0.0, 0.002), 4),
        "numa_miss": 0, "interrupts_on_cpus": int(window * rng.uniform(900, 1100)),
        "thermal_throttle_events": 0,
    }  # fmt: skip
    if cause == "throttled":
        signals["quota_cpus"] = 16.0
    counters: dict[str, object] = {
        "source": "perf_event_open", "available": True, "why": NO_PMU, "pmu": "",
        "events": {"context_switches": int(window * 15), "cpu_migrations": 0,
                   "page_faults": int(rng.uniform(1500, 1600))},
        "missing": {"l2_lines_in": "not supported (ENOENT)"}, "multiplexed": False,
    }  # fmt: skip
    if mode == "counters":
        work = 3 * int(params.get("bytes_per_array", 1 << 30)) * int(params.get("ntimes", 10))
        fills = 1.0 if cause != "traffic" else rng.uniform(1.5, 2.0)
        lines = work / 64 * L2_PER_LINE * fills * math.exp(rng.gauss(0.0, 0.03))
        read = work * 0.7 * (1.3 + 0.6 * (fills - 1.5) if cause == "traffic" else 1.0)
        events = counters["events"]
        assert isinstance(events, dict)
        events |= {"cycles": int(window * 64 * 2.6e9), "instructions": int(work / 8),
                   "l2_lines_in": int(lines)}  # fmt: skip
        counters |= {"why": "", "pmu": "cpu", "missing": {},
                     "dram_bytes": {"read": int(read * math.exp(rng.gauss(0.0, 0.03))),
                                    "write": int(work * 0.3)}}  # fmt: skip
    return {"version": 1, "window_s": window, "cpus": list(range(model.threads)),
            "signals": signals, "unavailable": {}, "counters": counters, "links": [],
            "gpu_throttle": []}  # fmt: skip


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _page_block(page: str) -> dict[str, object]:
    return {
        "requested": page,
        "kib": PAGE_KIB[page],
        "fallback": False,
        "note": f"generated: {page} pages assumed, nothing was allocated",
    }


def _placement(threads: int) -> list[dict[str, int]]:
    return [{"rank": 0, "thread": t, "cpu": t, "numa": t // CORES_PER_NUMA} for t in range(threads)]


@dataclass(frozen=True)
class LayoutPlacement:
    """Where a whole-node kernel's threads run under ``--layout``: the layout's default plan
    on the generated node (every rank in one result, as whereami-mpi writes it)."""

    ranks: int
    threads: int
    placement: tuple[dict[str, int], ...]


def layout_placement(layout: str | None) -> LayoutPlacement | None:
    """The default plan of ``layout`` on the generated node; None for no layout, or for a name
    topobind does not plan (those results keep one rank on cores 0-63)."""
    if not layout:
        return None
    from plans import plan_of

    from topobind.topo.topology import load_synthetic

    try:
        plan = plan_of(load_synthetic(TOPOLOGY), layout)
    except TopobindError:
        return None
    pu_core = plan.topology.pu_to_core()
    return LayoutPlacement(
        ranks=plan.nranks,
        threads=plan.threads,
        placement=tuple(
            {"rank": r.rank, "thread": t, "cpu": place[0], "numa": pu_core[place[0]].numa[0]}
            for r in plan.ranks
            for t, place in enumerate(r.places)
        ),
    )


def _c2c_base(a: int, b: int) -> float:
    if a // CORES_PER_L3 == b // CORES_PER_L3:
        return 28.0
    if a // CORES_PER_NUMA == b // CORES_PER_NUMA:
        return 85.0
    if a // CORES_PER_PACKAGE == b // CORES_PER_PACKAGE:
        return 112.0
    return 190.0


def _numa_latency(i: int, j: int) -> float:
    if i == j:
        return 105.0
    return 140.0 if i // 2 == j // 2 else 210.0


def _numa_bandwidth(i: int, j: int) -> float:
    if i == j:
        return 60_000.0
    return 38_000.0 if i // 2 == j // 2 else 21_000.0


def _result(
    model: KernelModel,
    host: str,
    when: datetime,
    page: str,
    spec: FleetSpec,
    time_factor: float,
    injected: float,
    rng: random.Random,
    placed: LayoutPlacement | None = None,
) -> dict[str, object]:
    """One kernel run's result document. ``placed``: the layout's placement, used by the
    kernels that run on the whole node (stream, dgemm, hpl)."""
    centre_time = time_factor * model.page_time_factor.get(PAGE_KIB[page], 1.0)

    def value(t: float) -> float:
        return model.typical / t if model.higher_is_better else model.typical * t

    trial_times = [
        centre_time * math.exp(abs(rng.gauss(0.0, model.trial_sd))) for _ in range(model.trials)
    ]
    if model.trials > 1:
        trial_times[0] *= 1.0 + abs(rng.gauss(0.0, 0.02))  # first trial pays page faults
    trials = [round(value(t), 3) for t in trial_times]
    s = sorted(trials)
    mid = len(s) // 2
    med = s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2.0
    best = max(trials) if model.higher_is_better else min(trials)
    metric = {
        "unit": model.unit,
        "higher_is_better": model.higher_is_better,
        "trials": trials,
        "best": best,
        "avg": round(sum(trials) / len(trials), 3),
        "min": min(trials),
        "max": max(trials),
    }
    head = best if model.stat == "best" else round(med, 3)
    params: dict[str, object] = {
        "generated": True,
        "generator": GENERATOR,
        "seed": spec.seed,
        "injected_slowdown": injected,
        "topology": TOPOLOGY,
    }
    metrics: dict[str, object] = {model.metric: metric}
    matrices: dict[str, object] | None = None
    if model.name == "stream":
        params |= {"array_elements": 400_000_000, "bytes_per_array": 3_200_000_000, "ntimes": 10}
    elif model.name in ("dgemm", "hpl"):
        params |= {"n": 20_000 if model.name == "dgemm" else 80_000, "reps": model.trials}
    elif model.name == "latency":
        params |= {"working_sets_kib": [32, 1024, 32768, 1048576], "hops": 10_000_000}
        # smaller working sets: cache latencies, hardly affected by pages
        for ws, base in (("32KiB", 1.2), ("1MiB", 4.1), ("32MiB", 13.5)):
            v = round(base * time_factor * math.exp(rng.gauss(0.0, 0.01)), 3)
            metrics[f"latency_{ws}"] = {
                "unit": "ns", "higher_is_better": False, "trials": [v], "best": v, "avg": v,
                "min": v, "max": v,
            }  # fmt: skip
        lat = [
            [round(_numa_latency(i, j) * centre_time * math.exp(rng.gauss(0, 0.01)), 2)
             for j in range(NUMA_NODES)]
            for i in range(NUMA_NODES)
        ]  # fmt: skip
        bw = [
            [round(_numa_bandwidth(i, j) / time_factor * math.exp(rng.gauss(0, 0.01)), 1)
             for j in range(NUMA_NODES)]
            for i in range(NUMA_NODES)
        ]  # fmt: skip
        labels = list(range(NUMA_NODES))
        matrices = {
            "numa_latency": {
                "unit": "ns", "rows": labels, "cols": labels, "row_kind": "numa",
                "col_kind": "numa", "values": lat,
            },
            "numa_bandwidth": {
                "unit": "MB/s", "rows": labels, "cols": labels, "row_kind": "numa",
                "col_kind": "numa", "values": bw,
            },
        }  # fmt: skip
    elif model.name == "c2c":
        params |= {"cpus": list(C2C_CPUS), "round_trips": 100_000}
        vals: list[list[float | None]] = []
        pair_values: list[float] = []
        for a in C2C_CPUS:
            row: list[float | None] = []
            for b in C2C_CPUS:
                if a == b:
                    row.append(None)
                    continue
                v = round(_c2c_base(a, b) * time_factor * math.exp(rng.gauss(0, 0.02)), 2)
                row.append(v)
                pair_values.append(v)
            vals.append(row)
        pair_values.sort()
        m = len(pair_values) // 2
        head = round((pair_values[m - 1] + pair_values[m]) / 2.0, 3)
        metric |= {"trials": [head], "best": head, "avg": head, "min": head, "max": head}
        labels = list(C2C_CPUS)
        matrices = {
            "c2c_latency": {
                "unit": "ns", "rows": labels, "cols": labels, "row_kind": "cpu",
                "col_kind": "cpu", "values": vals,
            }
        }  # fmt: skip
    whole_node = placed is not None and model.threads == CORES
    doc: dict[str, object] = {
        "schema": "topobind.result/1",
        "kernel": model.name,
        "host": host,
        "timestamp": _iso(when),
        "layout": spec.layout,
        "ranks": placed.ranks if placed is not None and whole_node else 1,
        "threads": placed.threads if placed is not None and whole_node else model.threads,
        "params": params,
        "pages": _page_block(page),
        "placement": (
            list(placed.placement)
            if placed is not None and whole_node
            else _placement(model.threads)
        ),
        "metrics": metrics,
        "headline": {
            "metric": model.metric,
            "stat": model.stat,
            "value": head,
            "unit": model.unit,
            "higher_is_better": model.higher_is_better,
        },
        "valid": True,
        "validation": "generated by tests/fleetgen.py (synthetic, not measured)",
    }
    if matrices is not None:
        doc["matrices"] = matrices
    return doc


def _whereami_lines(host: str, when: datetime, spec: FleetSpec, page: str) -> str:
    docs = []
    for t in range(4):
        docs.append(
            {
                "schema": "topobind.result/1",
                "kernel": "whereami",
                "host": host,
                "timestamp": _iso(when),
                "layout": spec.layout,
                "ranks": 1,
                "threads": 4,
                "params": {
                    "generated": True,
                    "generator": GENERATOR,
                    "seed": spec.seed,
                    "topology": TOPOLOGY,
                },
                "pages": _page_block(page),
                "placement": [{"rank": 0, "thread": t, "cpu": t * 2, "numa": 0}],
                "metrics": {},
                "headline": None,
                "valid": True,
                "validation": "generated by tests/fleetgen.py (synthetic, not measured)",
            }
        )
    return "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in docs)


def generate_fleet(outdir: str | Path, spec: FleetSpec) -> FleetWritten:
    """Write the fleet into ``outdir`` (must be absent or empty): ``HOST/KERNEL-PAGES-TIME.json``.

    Files are written plainly (no fsync): the output is a throw-away synthetic data set.
    """
    out = Path(outdir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TopobindError(f"{out}: exists and is not an empty directory; choose a new -o")
    if spec.hosts < 1 or spec.runs < 1:
        raise TopobindError("--hosts and --runs must be at least 1")
    for k in spec.kernels:
        if k not in KERNELS:
            raise TopobindError(f"unknown kernel {k!r}; choose from {', '.join(KERNELS)}")
    for p in spec.pages:
        if p not in PAGE_KIB:
            raise TopobindError(f"unknown page size {p!r}; choose from {', '.join(PAGE_KIB)}")
    hosts = tuple(host_name(i) for i in range(1, spec.hosts + 1))
    unknown = sorted(set(spec.slow) - set(hosts))
    if unknown:
        raise TopobindError(
            f"--slow names hosts that are not generated: {', '.join(unknown)} "
            f"(hosts are {hosts[0]}..{hosts[-1]})"
        )
    if spec.evidence not in EVIDENCE_MODES:
        raise TopobindError(f"--evidence {spec.evidence!r}: choose software or counters")
    if spec.causes and not spec.evidence:
        raise TopobindError("--cause needs --evidence software or counters")
    unknown_cause = sorted(set(spec.causes) - set(hosts))
    if unknown_cause:
        raise TopobindError(
            f"--cause names hosts that are not generated: {', '.join(unknown_cause)}"
        )
    placed = layout_placement(spec.layout)
    rng = random.Random(spec.seed)
    ev_rng = random.Random(f"{spec.seed}-evidence")  # the figures stay as without evidence
    out.mkdir(parents=True, exist_ok=True)
    files = results = 0
    for h_index, host in enumerate(hosts):
        host_dir = out / host
        host_dir.mkdir()
        host_offset = math.exp(rng.gauss(0.0, HOST_SD))
        slow = spec.slow.get(host, {})
        offset_minutes = rng.randrange(0, 50)
        for run in range(spec.runs):
            t0 = spec.start + timedelta(hours=run * 6, minutes=offset_minutes + h_index % 7)
            for p_index, page in enumerate(spec.pages):
                for k_index, kernel in enumerate(spec.kernels):
                    when = t0 + timedelta(minutes=5 * (p_index * len(spec.kernels) + k_index))
                    stamp = when.strftime("%Y%m%dT%H%M%SZ")
                    if kernel == "whereami":
                        path = host_dir / f"whereami-{page}-{stamp}.jsonl"
                        path.write_text(_whereami_lines(host, when, spec, page))
                        files += 1
                        results += 4
                        continue
                    model = MODELS[kernel]
                    injected = slow.get(kernel, slow.get(None, 1.0))
                    factor = host_offset * injected * math.exp(rng.gauss(0.0, model.run_sd))
                    if rng.random() < HICCUP_PROB:
                        factor *= rng.uniform(*HICCUP_RANGE)
                    doc = _result(model, host, when, page, spec, factor, injected, rng, placed)
                    if spec.evidence:
                        params = doc["params"]
                        assert isinstance(params, dict)
                        cause = spec.causes.get(host)
                        doc["evidence"] = _evidence(
                            model, params, spec.evidence, cause, factor, ev_rng
                        )
                    path = host_dir / f"{kernel}-{page}-{stamp}.json"
                    path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
                    files += 1
                    results += 1
    return FleetWritten(out, files, results, hosts, spec.slow)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python tests/fleetgen.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Write a SYNTHETIC fleet of topobind kernel results (marked params.generated=true,\n"
            "hosts gen-node0001...), for tests, demos and the report benchmark. Nothing is\n"
            "measured. Deterministic for a given --seed."
        ),
        epilog=(
            "examples:\n"
            "  python tests/fleetgen.py --hosts 40 --runs 7 --kernels stream,dgemm,latency \\\n"
            "      --slow gen-node0007:1.12,gen-node0019:1.15 -o /tmp/fleet\n"
            "  python tests/fleetgen.py --hosts 8 --runs 5 --kernels stream,latency \\\n"
            "      --pages 4k,2M,1G -o /tmp/pages   # page-size comparison\n"
            "  python tests/fleetgen.py --hosts 4 --runs 3 --kernels c2c,latency \\\n"
            "      --slow gen-node0002:1.2:c2c -o /tmp/matrices\n"
            "then: topobind report /tmp/fleet -o /tmp/fleet-report\n"
            "FACTOR 1.12 = the same work takes 12% longer (bandwidth / 1.12, latency x 1.12)."
        ),
    )
    p.add_argument("--hosts", type=int, default=40, help="number of hosts (default 40)")
    p.add_argument("--runs", type=int, default=7, help="runs per host and kernel (default 7)")
    p.add_argument(
        "--kernels",
        default="stream,dgemm,latency",
        help=f"comma-separated, from {','.join(KERNELS)} (default stream,dgemm,latency)",
    )
    p.add_argument(
        "--slow",
        default="",
        help="HOST:FACTOR[:KERNEL],... hosts made slower by a known factor (1.12 = 12%% slower)",
    )
    p.add_argument("--pages", default="2M", help="comma-separated page sizes 4k,2M,1G (default 2M)")
    p.add_argument(
        "--layout",
        default=None,
        help="layout recorded in the results (default null); a topobind layout also gives "
        "STREAM/DGEMM/HPL its default placement on the generated node",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--evidence", default="", choices=EVIDENCE_MODES,
                   help="write an evidence section: software (a VM: no L2 counter) or counters "
                   "(L2 lines in and DRAM bytes)")  # fmt: skip
    p.add_argument("--cause", default="",
                   help="HOST:traffic (McCalpin's 1.5-2x L2 lines in) or HOST:throttled, ...; "
                   "with --evidence")  # fmt: skip
    p.add_argument("-o", "--output", required=True, help="directory to create (absent or empty)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        spec = FleetSpec(
            hosts=args.hosts,
            runs=args.runs,
            kernels=tuple(k.strip() for k in args.kernels.split(",") if k.strip()),
            slow=parse_slow(args.slow),
            pages=tuple(p.strip() for p in args.pages.split(",") if p.strip()),
            layout=args.layout,
            seed=args.seed,
            evidence=args.evidence,
            causes=parse_causes(args.cause),
        )
        written = generate_fleet(args.output, spec)
    except TopobindError as exc:
        print(f"fleetgen: error: {exc}", file=sys.stderr)
        return 2
    slow = ", ".join(
        f"{h} x{f:g}" + (f" ({k})" if k else "")
        for h, d in written.slow.items()
        for k, f in d.items()
    )
    print(
        f"generated (synthetic) {written.results:,} results in {written.files:,} files: "
        f"{len(written.hosts)} hosts x {spec.runs} runs x {len(spec.kernels)} kernels "
        f"({','.join(spec.kernels)}) x {len(spec.pages)} page size(s) -> {written.directory}"
        + (f"; slowed: {slow}" if slow else "; no host slowed")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
