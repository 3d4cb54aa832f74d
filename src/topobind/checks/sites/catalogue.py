"""The checks catalogue: every ReFrame check family of ``reframe_tests/``, its variants
and the figures (metrics, units, direction, attainable maximum) a target may name."""

from __future__ import annotations

from dataclasses import dataclass


# --- checks registry
@dataclass(frozen=True)
class MetricSpec:
    unit: str
    higher_is_better: bool
    description: str
    maximum: float | None = None  # the largest value the metric can take (None: unbounded)


@dataclass(frozen=True)
class CheckSpec:
    """A family of ReFrame checks (one file in reframe_tests/) and what its targets may name."""

    name: str
    variant_kind: str  # what a variant is: "layout", "pages", "pair", ...
    variants: tuple[str, ...]
    metrics: dict[str, MetricSpec]
    description: str
    reframe_class: str  # the ReFrame test class (reframe_tests/)
    parameter: str | None  # its parameter naming the variant (None: the single variant)


_PCT_LOWER = "%"
CHECKS: dict[str, CheckSpec] = {
    "stream": CheckSpec(
        "stream",
        "layout",
        (
            "compact",
            "every-other-core",
            "per-l3",
            "numa",
            "numa-every-other-core",
            "l3-groups:32",
        ),
        {
            "copy": MetricSpec(
                "MB/s", True, "STREAM Copy: best of the trial-by-trial sums over the ranks"
            ),
            "scale": MetricSpec(
                "MB/s", True, "STREAM Scale: best of the trial-by-trial sums over the ranks"
            ),
            "add": MetricSpec(
                "MB/s", True, "STREAM Add: best of the trial-by-trial sums over the ranks"
            ),
            "triad": MetricSpec(
                "MB/s", True, "STREAM Triad: best of the trial-by-trial sums over the ranks"
            ),
        },
        "STREAM bandwidth per layout",
        "StreamCheck",
        "layout",
    ),
    "dgemm": CheckSpec(
        "dgemm",
        "pages",
        ("1G", "2M", "4k"),
        {
            "gflops": MetricSpec("GFLOP/s", True, "median GFLOP/s of the repetitions"),
            "max_slowdown": MetricSpec(_PCT_LOWER, False, "slowest repetition vs the median"),
            "cv": MetricSpec(_PCT_LOWER, False, "coefficient of variation of the repetitions"),
            "frac_slower_5pct": MetricSpec(
                _PCT_LOWER,
                False,
                "share of repetitions more than 5 % slower than the median",
                maximum=50.0,  # no more than half of the repetitions lie below their median
            ),
        },
        "DGEMM run-to-run variability on all cores, by page size",
        "DgemmCheck",
        "pages",
    ),
    "hpl": CheckSpec(
        "hpl",
        "size",
        ("quick", "full"),
        {
            "gflops": MetricSpec("GFLOP/s", True, "median HPL GFLOP/s of the runs"),
            "efficiency": MetricSpec("%", True, "median GFLOP/s / node peak"),
            "max_slowdown": MetricSpec(_PCT_LOWER, False, "slowest run vs the median"),
        },
        "HPL (topobind bench hpl) on the whole node, one rank per core",
        "HplCheck",
        "size",
    ),
    "latency": CheckSpec(
        "latency",
        "placement",
        ("local",),
        {"latency_ns": MetricSpec("ns", False, "load latency at the largest working set")},
        "memory load latency (pointer chase), thread and memory on NUMA node 0",
        "LatencyCheck",
        None,
    ),
    "c2c": CheckSpec(
        "c2c",
        "pair",
        ("same-l3", "cross-l3"),
        {"c2c_ns": MetricSpec("ns", False, "core-to-core CAS ping-pong latency (one way)")},
        "core-to-core latency between two cores of one L3 domain, or of two L3 domains",
        "C2CCheck",
        "pair",
    ),
}
