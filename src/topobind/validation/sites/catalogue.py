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


# --- settings: what a site's settings: (ReFrame -S variables, and topobind's own) may name
@dataclass(frozen=True)
class SettingSpec:
    """One setting: ``kind`` says how its value is read (site check refuses any other):
    count (whole number lo..hi), number (lo..hi), fraction (above lo, below hi), size (bytes,
    binary suffixes, lo..hi), elements (a count with decimal suffixes, lo..hi; '' = the
    check's default), bool, choice (one of ``choices``), duration (90s, 10m, 1h), sizes (a
    comma list of sizes)."""

    kind: str
    lo: float = 0
    hi: float = 0
    choices: tuple[str, ...] = ()
    empty: bool = False  # '' means the check's default


#: STREAM's cost model (reframe_tests/topobind_rfm/probe.py stream-size): one trial moves 80
#: bytes an element (copy 2 + scale 2 + add 3 + triad 3 arrays of 8 bytes), and the kernel
#: takes at least 1000 elements: a cap under 80,000 bytes a trial runs nothing ('0 3')
STREAM_BYTES_PER_ELEMENT = 80
STREAM_KERNEL_MIN_ELEMENTS = 1000
LATENCY_MIN_WORKING_SET = 1 << 20  # the latency probe's working sets are whole MiB
MAX_BYTES = 1 << 50  # 1 PiB: no node moves more in one run
MAX_COUNT = 10_000  # trials, repetitions, samples, runs
PAGES = ("1G", "2M", "thp", "4k", "auto")
_BOOL = SettingSpec("bool")

#: settings of topobind itself (no check): read by validate, not passed to a check
OWN_SETTINGS: dict[str, SettingSpec] = {
    "outlier_threshold": SettingSpec("fraction", 0, 10),  # verdict.MAX_THRESHOLD, exclusive
    "node_budget": SettingSpec("duration"),
    # jobs of a validate --each-node run queued at once (validation/limits.py: one job a node)
    "max_submit": SettingSpec("count", 1, 10**9 - 1),
}

#: the variables of every check (reframe_tests/: the ReFrame class -> variable -> spec); the
#: base class's are every check's; tests/validation/test_site_settings.py holds this against the
#: checks' own variable() lines
CHECK_VARIABLES: dict[str, dict[str, SettingSpec]] = {
    "TopobindCheck": {
        "strict_load": _BOOL,
        "sanity_once": _BOOL,
        "tier": SettingSpec("choice", choices=("smoke", "quick", "full")),
    },
    "StreamCheck": {
        "elements": SettingSpec("elements", STREAM_KERNEL_MIN_ELEMENTS, 10**12, empty=True),
        "trials": SettingSpec("count", 1, MAX_COUNT),
        "pages": SettingSpec("choice", choices=PAGES),
        "nontemporal": _BOOL,
        "quick_trials": SettingSpec("count", 1, MAX_COUNT),
        # its least: the quick trials of the kernel's least arrays (schema._stream_cap_problem)
        "max_bytes_per_run": SettingSpec("size", 1, MAX_BYTES),
    },
    "DgemmCheck": {
        "n": SettingSpec("count", 1, 1 << 17),
        "reps": SettingSpec("count", 1, MAX_COUNT),
    },
    "HplCheck": {
        "n": SettingSpec("count", 0, 1 << 24),
        "mem_fraction": SettingSpec("number", 0, 0.95),
        "runs": SettingSpec("count", 1, MAX_COUNT),
        "quick_n": SettingSpec("count", 1, 1 << 24),
    },
    "HugepagesCheck": {"pages_1g_per_numa": SettingSpec("count", -1, 1 << 20)},
    "LatencyCheck": {
        "sizes": SettingSpec("sizes", 1, MAX_BYTES, empty=True),
        "pages": SettingSpec("choice", choices=PAGES),
        "max_working_set": SettingSpec("size", LATENCY_MIN_WORKING_SET, MAX_BYTES),
        "quick_small": SettingSpec("size", 4096, MAX_BYTES, empty=True),
        # the kernel's --min-time bounds (kernels/latency.c)
        "min_time": SettingSpec("number", 1e-4, 100),
        "quick_bw_row": _BOOL,
    },
    "C2CCheck": {
        "samples": SettingSpec("count", 1, MAX_COUNT),
        "quick_samples": SettingSpec("count", 1, MAX_COUNT),
    },
    "BindingCheck": {},
    "NodeCheck": {},
}
