"""Group runs, summarise each host and the fleet, find slow hosts, compare page sizes.

Definitions (docs/report.md repeats them for site admins):

- A **run** is one result document; its value is the headline value.
- Runs are grouped by kernel, layout and page size (``pages.kib``): a **fleet group**. Inside
  a fleet group, each host's runs are ordered by timestamp; with ``warmup=W`` the first W
  runs of every host are reported apart and left out of every figure.
- The **fleet median** is the median of the host medians (each host counts once, however many
  runs it has); the **fleet MAD** is the median absolute deviation of the host medians,
  scaled by 1.4826 (a robust standard deviation).
- A host's **worse %** is how far its median is worse than the fleet median, in percent of
  the fleet median: below it for higher-is-better metrics, above it for lower-is-better ones.
  Negative means better than the fleet.
- A host is **slow** when its median is worse than the fleet median by more than
  ``slow_mads`` fleet MADs AND by more than ``slow_pct`` percent. The second condition keeps a
  very uniform fleet (tiny MAD) from flagging hosts over differences nobody cares about;
  the first keeps a noisy fleet from flagging its normal spread.
"""

from __future__ import annotations

import math
import re
import warnings
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from topobind.errors import TopobindError, plural
from topobind.measure import stats
from topobind.measure.results import Headline, Matrix, Result
from topobind.report.cause_views import CauseViews
from topobind.report.cause_views import collect as collect_cause_views
from topobind.report.layouts_seen import Layouts

MAX_WARMUP = 1_000_000
MAX_SLOW_LIMIT = 1000.0  # --slow-mads / --slow-pct: beyond it nothing could ever be slow
TIME_UNITS = frozenset({"ns", "us", "µs", "ms", "s", "cycles", "clocks"})


def lower_is_better_unit(unit: str) -> bool:
    """Matrices carry no direction: times are lower-is-better, everything else higher."""
    return unit.strip().lower() in TIME_UNITS


def page_label(kib: int | None) -> str:
    if kib is None:
        return "n/a"
    if kib % 1048576 == 0:
        return f"{kib // 1048576} GiB"
    if kib % 1024 == 0:
        return f"{kib // 1024} MiB"
    return f"{kib} KiB"


def pages_label(kib: int | None, fallback: str | None = None) -> str:
    """``2 MiB``, or ``2 MiB (THP fallback from 1G)`` when the runs did not get what they asked."""
    return page_label(kib) + (f" ({fallback})" if fallback else "")


def pages_slug(kib: int | None, fallback: str | None = None) -> str:
    """The page size in a file name: ``2MiB``, ``2MiB_THP_fallback_from_1G``, ``nopages``."""
    if kib is None:
        return "nopages"
    text = page_label(kib).replace(" ", "") + (f" {fallback}" if fallback else "")
    return re.sub(r"[^A-Za-z0-9-]+", "_", text).strip("_")


def kernel_and(kernel: str, name: str | None) -> str:
    """``kernel name`` without saying the kernel twice: ("c2c", "c2c") -> "c2c",
    ("c2c", "c2c_latency") -> "c2c_latency", ("stream", "triad") -> "stream triad"."""
    if not name:
        return kernel
    if name == kernel or name.startswith(kernel + "_"):
        return name
    return f"{kernel} {name}"


def where_text(layout: str | None, kib: int | None, fallback: str | None = None) -> str:
    """``layout per-l3, 2 MiB pages[, THP fallback from 1G]``; what a result did not record
    is left out (no "layout -"); "" when neither is known."""
    parts = []
    if layout:
        parts.append(f"layout {layout}")
    if kib is not None:
        parts.append(f"{page_label(kib)} pages")
    if fallback:
        parts.append(fallback)
    return ", ".join(parts)


_SIZE_METRIC = re.compile(r"^latency_(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?$", re.IGNORECASE)
_SIZE_UNITS = {"": "B", "K": "KiB", "M": "MiB", "G": "GiB", "T": "TiB"}


def metric_label(kernel: str, metric: str | None) -> str:
    """A headline metric in words for pictures: ``latency_1GiB`` -> "memory latency at 1 GiB
    working set" (a working set, not a page size); others ``<kernel> <metric>``."""
    m = _SIZE_METRIC.match(metric or "")
    if m:
        size = f"{m.group(1)} {_SIZE_UNITS[m.group(2).upper()]}"
        return f"memory latency at {size} working set"
    return kernel_and(kernel, metric)


@dataclass(frozen=True)
class Options:
    warmup: int = 0
    slow_mads: float = 3.0
    slow_pct: float = 5.0
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 0 <= self.warmup <= MAX_WARMUP:
            raise TopobindError(
                f"--warmup {self.warmup}: give the number of first runs per host to leave out, "
                f"0 to {MAX_WARMUP:,} (default 0)"
            )
        for option, value, default, what in (
            ("--slow-mads", self.slow_mads, 3, "fleet MADs"),
            ("--slow-pct", self.slow_pct, 5, "percent"),
        ):
            if not (math.isfinite(value) and 0 <= value <= MAX_SLOW_LIMIT):
                raise TopobindError(
                    f"{option} {value:g}: give a number of {what} from 0 to {MAX_SLOW_LIMIT:g} "
                    f"(default {default}); nan and inf would turn slow-host detection off"
                )


GroupKey = tuple[str, str | None, int | None, str | None]  # kernel, layout, kib, fallback


def _group_order(key: GroupKey) -> tuple[str, str, int, str]:
    return (key[0], key[1] or "", key[2] or 0, key[3] or "")


@dataclass(frozen=True)
class HostStats:
    host: str
    summary: stats.Summary  # of the kept runs' headline values
    runs: tuple[Result, ...]  # kept runs, in time order
    warmup_runs: tuple[Result, ...]  # dropped as warm-up, in time order
    worse_pct: float  # median vs fleet median, % of the fleet median; > 0 = worse
    slowdown: float  # stats.slowdown of the host median against the fleet median (fraction)
    mads: float | None  # how many fleet MADs worse (> 0) or better (< 0); None if the MAD is 0
    slow: bool
    #: sign test: confidence that the host's median is beyond the slow threshold (0 when no
    #: threshold); the same figure as topobind validate --each-node (checks.acceptance)
    confidence: float = 0.0
    #: a slow host's cause (measure.causes: its runs' evidence against the other hosts' of
    #: the group); '' for a host that is not slow
    cause: str = ""
    #: the signals (measure.causes keys) its cause names, the most outside first
    cause_signals: tuple[str, ...] = ()

    @property
    def weak(self) -> bool:
        """Too few runs (McCalpin: 7) or too little confidence to call it surely."""
        return self.summary.n < stats.MIN_RUNS or self.confidence < stats.STRONG_CONFIDENCE


@dataclass(frozen=True)
class FleetGroup:
    kernel: str
    layout: str | None
    page_kib: int | None
    metric: str
    stat: str | None
    unit: str
    higher_is_better: bool
    hosts: tuple[HostStats, ...]  # worst first
    all_runs: stats.Summary  # every kept run of every host
    fleet_median: float  # median of host medians
    fleet_mad: float  # scaled MAD of host medians
    threshold: float | None  # a host median beyond this value is slow; None: one host only
    only_warmup: tuple[str, ...]  # hosts that had no run left after the warm-up
    page_fallback: str | None = None  # the runs fell back from another page size (reader)

    @property
    def key(self) -> GroupKey:
        return (self.kernel, self.layout, self.page_kib, self.page_fallback)

    @property
    def pages(self) -> str:
        return pages_label(self.page_kib, self.page_fallback)

    @property
    def label(self) -> str:
        return f"{self.kernel} [layout {self.layout or '-'}, {self.pages} pages]"

    @property
    def slug(self) -> str:
        parts = [self.kernel, self.layout or "nolayout"]
        slug = "-".join("".join(c if c.isalnum() or c in "-_" else "_" for c in p) for p in parts)
        return f"{slug}-{pages_slug(self.page_kib, self.page_fallback)}"

    def sort_key(self) -> tuple[str, str, int, str]:
        return _group_order(self.key)

    @property
    def slow_hosts(self) -> tuple[HostStats, ...]:
        return tuple(h for h in self.hosts if h.slow)


@dataclass(frozen=True)
class PageRow:
    page_kib: int
    hosts: int
    runs: int
    fleet_median: float
    better_pct: float  # vs the reference page size; > 0 = better
    values: tuple[float, ...]  # host medians, for the picture
    page_fallback: str | None = None

    @property
    def pages(self) -> str:
        return pages_label(self.page_kib, self.page_fallback)


@dataclass(frozen=True)
class PageComparison:
    kernel: str
    layout: str | None
    metric: str
    unit: str
    higher_is_better: bool
    reference_kib: int
    rows: tuple[PageRow, ...]  # by page size, ascending; the first is the reference

    @property
    def reference(self) -> str:
        return self.rows[0].pages


@dataclass(frozen=True)
class MatrixGroup:
    """One matrix of a fleet group: its elementwise median over the runs (NaN where never
    measured), and the median of the slowest host's runs."""

    kernel: str
    layout: str | None
    page_kib: int | None
    median: Matrix  # the labels, unit and kinds of the group's matrices; medians as values
    lower_is_better: bool
    runs: int
    hosts: int
    worst_host: str | None  # the host with the worst headline median (fleets of 2+ hosts)
    worst_host_median: Matrix | None
    page_fallback: str | None = None

    @property
    def pages(self) -> str:
        return pages_label(self.page_kib, self.page_fallback)

    @property
    def name(self) -> str:
        return self.median.name

    @property
    def unit(self) -> str:
        return self.median.unit

    @property
    def rows(self) -> tuple[int | str, ...]:
        return self.median.rows

    @property
    def cols(self) -> tuple[int | str, ...]:
        return self.median.cols

    @property
    def row_kind(self) -> str:
        return self.median.row_kind

    @property
    def col_kind(self) -> str:
        return self.median.col_kind


@dataclass(frozen=True)
class Report:
    options: Options
    inputs: tuple[str, ...]
    files: int
    documents: int
    no_headline: int  # e.g. whereami results
    invalid: tuple[Result, ...]  # runs with valid=false, left out
    generated: int  # documents marked params.generated
    groups: tuple[FleetGroup, ...]
    pages: tuple[PageComparison, ...]
    matrices: tuple[MatrixGroup, ...]
    extra: dict[str, object] = field(default_factory=dict)
    layouts: Layouts = field(default_factory=Layouts)  # the layouts' recorded placements
    skipped: tuple[tuple[str, str], ...] = ()  # (file, why): not results, in ReFrame output
    #: valid results of a tier that measures no performance (smoke), left out: tier -> count
    not_judged: dict[str, int] = field(default_factory=dict)
    #: the pictures' view of the causes: signals beside the figures, McCalpin's scatter
    cause_views: CauseViews = field(default_factory=CauseViews)

    @property
    def slow(self) -> list[tuple[FleetGroup, HostStats]]:
        """Every slow (group, host), the worst first."""
        out = [(g, h) for g in self.groups for h in g.slow_hosts]
        out.sort(key=lambda gh: (-gh[1].worse_pct, gh[1].host, gh[0].sort_key()))
        return out

    @property
    def slow_host_names(self) -> list[str]:
        return sorted({h.host for _, h in self.slow})

    @property
    def runs_used(self) -> int:
        return sum(g.all_runs.n for g in self.groups)


def _head(r: Result) -> Headline:
    """The headline of a result the report analyses (those without one are only counted)."""
    assert r.headline is not None, r.source
    return r.headline


def _check_units(runs: Sequence[Result]) -> None:
    """One kernel, one headline metric, unit and direction: else the file that differs."""
    first: dict[str, Result] = {}
    for r in runs:
        ref = first.setdefault(r.kernel, r)
        if r is ref:
            continue
        h, ref_h = _head(r), _head(ref)
        for what, a, b in (
            ("unit", ref_h.unit, h.unit),
            ("metric", ref_h.metric, h.metric),
            ("higher_is_better", ref_h.higher_is_better, h.higher_is_better),
        ):
            if a != b:
                raise TopobindError(
                    f"{r.source}: {r.kernel} headline {what} is {b!r} but {ref.source} has {a!r}; "
                    f"results of one kernel must share metric, unit and direction: "
                    f"report them separately"
                )


def _host_stats(
    host: str, runs: list[Result], hib: bool, opts: Options
) -> tuple[tuple[Result, ...], tuple[Result, ...], stats.Summary | None]:
    runs.sort(key=lambda r: (r.time, r.source))
    warm = tuple(runs[: opts.warmup])
    kept = tuple(runs[opts.warmup :])
    if not kept:
        return kept, warm, None
    values = [_head(r).value for r in kept]
    return kept, warm, stats.summarize(values, hib, confidence=opts.confidence)


def _beyond(values: Sequence[float], threshold: float | None, hib: bool) -> float:
    """Sign-test confidence that the median of ``values`` is worse than ``threshold``."""
    if threshold is None or not values:
        return 0.0
    n = sum(1 for v in values if (v < threshold if hib else v > threshold))
    return stats.beyond_confidence(n, len(values))


def _fleet_group(
    key: GroupKey, by_host: dict[str, list[Result]], opts: Options
) -> FleetGroup | None:
    sample = _head(next(iter(by_host.values()))[0])
    hib = sample.higher_is_better
    per_host: list[tuple[str, tuple[Result, ...], tuple[Result, ...], stats.Summary]] = []
    only_warmup: list[str] = []
    for host in sorted(by_host):
        kept, warm, summary = _host_stats(host, by_host[host], hib, opts)
        if summary is None:
            only_warmup.append(host)
        else:
            per_host.append((host, kept, warm, summary))
    if not per_host:
        return None
    medians = [s.median for _, _, _, s in per_host]
    fleet_median = stats.median(medians)
    fleet_mad = stats.mad(medians, scaled=True)
    margin = max(opts.slow_mads * fleet_mad, opts.slow_pct / 100.0 * fleet_median)
    threshold: float | None = fleet_median - margin if hib else fleet_median + margin
    if len(per_host) < 2:  # one host has nothing to be compared with: no threshold
        threshold = None
    hosts = []
    for host, kept, warm, s in per_host:
        dist = (fleet_median - s.median) if hib else (s.median - fleet_median)
        worse_pct = dist / fleet_median * 100.0
        slow = (
            threshold is not None
            and dist > opts.slow_mads * fleet_mad
            and worse_pct > opts.slow_pct
        )
        hosts.append(
            HostStats(
                host=host,
                summary=s,
                runs=kept,
                warmup_runs=warm,
                worse_pct=worse_pct,
                slowdown=stats.slowdown(s.median, fleet_median, hib),
                mads=dist / fleet_mad if fleet_mad > 0 else None,
                slow=slow,
                confidence=_beyond(s.values, threshold, hib),
            )
        )
    hosts = _with_causes(hosts, opts.slow_pct / 100.0)
    hosts.sort(key=lambda h: (-h.worse_pct, h.host))
    all_values = [v for h in hosts for v in h.summary.values]
    return FleetGroup(
        kernel=key[0],
        layout=key[1],
        page_kib=key[2],
        metric=sample.metric,
        stat=sample.stat,
        unit=sample.unit,
        higher_is_better=hib,
        hosts=tuple(hosts),
        all_runs=stats.summarize(all_values, hib, confidence=opts.confidence),
        fleet_median=fleet_median,
        fleet_mad=fleet_mad,
        threshold=threshold,
        only_warmup=tuple(only_warmup),
        page_fallback=key[3],
    )


def _with_causes(hosts: list[HostStats], threshold: float) -> list[HostStats]:
    """Each slow host with its cause (measure.causes.explain): the evidence of its kept runs
    (the results' ``evidence`` section, where the reader keeps it) against the other hosts'."""
    if not any(h.slow for h in hosts):
        return hosts
    from dataclasses import replace

    from topobind.measure import causes

    runs: dict[str, list[dict[str, float]]] = {}
    why: dict[str, str] = {}
    for h in hosts:
        for r in h.runs:
            ev = getattr(r, "evidence_document", None)  # the section as read (a dict)
            signals, none = causes.signals_of({"evidence": ev} if ev is not None else {})
            runs.setdefault(h.host, []).append(signals)
            why[h.host] = none or why.get(h.host, "")
    if all(not any(rs) for rs in runs.values()):
        why = dict.fromkeys(runs, "the results carry no evidence section")
    got = causes.explain_each([h.host for h in hosts if h.slow], runs, threshold, why)
    out = []
    for h in hosts:
        if h.slow:
            e = got[h.host]
            h = replace(h, cause=e.text, cause_signals=tuple(c.signal for c in e.causes))
        out.append(h)
    return out


def _page_comparisons(groups: Sequence[FleetGroup]) -> list[PageComparison]:
    by_kl: dict[tuple[str, str | None], list[FleetGroup]] = defaultdict(list)
    for g in groups:
        if g.page_kib is not None:
            by_kl[(g.kernel, g.layout)].append(g)
    out = []
    for (kernel, layout), gs in sorted(by_kl.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        if len(gs) < 2:
            continue
        gs.sort(key=lambda g: (g.page_kib or 0, g.page_fallback or ""))
        ref = gs[0]
        hib = ref.higher_is_better
        rows = []
        for g in gs:
            diff = (
                (g.fleet_median - ref.fleet_median) if hib else (ref.fleet_median - g.fleet_median)
            )
            rows.append(
                PageRow(
                    page_kib=int(g.page_kib or 0),
                    hosts=len(g.hosts),
                    runs=g.all_runs.n,
                    fleet_median=g.fleet_median,
                    better_pct=diff / ref.fleet_median * 100.0,
                    values=tuple(h.summary.median for h in g.hosts),
                    page_fallback=g.page_fallback,
                )
            )
        out.append(
            PageComparison(
                kernel=kernel,
                layout=layout,
                metric=ref.metric,
                unit=ref.unit,
                higher_is_better=hib,
                reference_kib=int(ref.page_kib or 0),
                rows=tuple(rows),
            )
        )
    return out


MatrixKey = tuple[str, str, tuple[int | str, ...], tuple[int | str, ...]]  # name, unit, rows, cols


def _matrix_groups(groups: Sequence[FleetGroup]) -> list[MatrixGroup]:
    import numpy as np  # only when there are matrices; numpy comes with matplotlib

    out = []
    for g in groups:
        collected: dict[MatrixKey, list[tuple[str, Any]]] = defaultdict(list)
        kinds: dict[MatrixKey, tuple[str, str]] = {}
        for h in g.hosts:
            for r in h.runs:
                for m in r.matrices.values():
                    k = (m.name, m.unit, m.rows, m.cols)
                    collected[k].append((h.host, m.values))
                    kinds[k] = (m.row_kind, m.col_kind)
        worst = g.hosts[0].host if len(g.hosts) > 1 else None
        for k in sorted(collected, key=lambda k: (k[0], k[1], len(k[2]))):
            _, unit, rows, cols = k
            items = collected[k]
            shape = (len(rows), len(cols))
            stack = np.stack([np.frombuffer(v, dtype=np.float64) for _, v in items]).reshape(
                (len(items), *shape)
            )
            med = _median_matrix(np, stack, k, kinds[k])
            worst_med = None
            if worst is not None:
                mine = [i for i, (host, _) in enumerate(items) if host == worst]
                if mine:
                    worst_med = _median_matrix(np, stack[mine], k, kinds[k])
            out.append(
                MatrixGroup(
                    kernel=g.kernel,
                    layout=g.layout,
                    page_kib=g.page_kib,
                    median=med,
                    lower_is_better=lower_is_better_unit(unit),
                    runs=len(items),
                    hosts=len({host for host, _ in items}),
                    worst_host=worst if worst_med is not None else None,
                    worst_host_median=worst_med,
                    page_fallback=g.page_fallback,
                )
            )
    return out


def _median_matrix(np: Any, stack: Any, key: MatrixKey, kinds: tuple[str, str]) -> Matrix:
    """The elementwise median of a stack of one matrix's values, as a :class:`Matrix`."""
    name, unit, rows, cols = key
    return Matrix(name, unit, rows, cols, *kinds, array("d", _nanmedian(np, stack).ravel()))


def _nanmedian(np: Any, stack: Any) -> Any:
    """Elementwise median ignoring NaN, quietly NaN where a cell was never measured."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells (the c2c diagonal)
        return np.nanmedian(stack, axis=0)


def analyse(
    runs: Sequence[Result],
    opts: Options,
    inputs: tuple[str, ...] = (),
    files: int = 0,
) -> Report:
    """Everything the report shows, from the runs read. Raises TopobindError for bad input."""
    if not runs:
        raise TopobindError(f"no results in {', '.join(inputs) or 'the input'}")
    with_head = [r for r in runs if r.headline is not None]
    no_headline = len(runs) - len(with_head)
    _check_units(with_head)
    invalid = tuple(r for r in with_head if not r.valid)
    good, not_judged = _judged(r for r in with_head if r.valid)
    if not good and not_judged:
        raise TopobindError(
            f"{', '.join(inputs) or 'input'}: nothing to judge: {_not_judged_text(not_judged)} "
            "measure no performance (not judged); report a quick or full tier's results"
        )
    if not good:
        why = (
            f'all {len(with_head)} results with a headline are marked invalid ("valid": false)'
            if with_head
            else f"none of the {len(runs)} results has a headline value (whereami has none)"
        )
        raise TopobindError(f"{', '.join(inputs) or 'input'}: nothing to report: {why}")
    grouped: dict[GroupKey, dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    for r in good:
        grouped[(r.kernel, r.layout, r.page_kib, r.page_fallback)][r.host].append(r)
    groups = []
    for key in sorted(grouped, key=_group_order):
        g = _fleet_group(key, grouped[key], opts)
        if g is not None:
            groups.append(g)
    if not groups:
        raise TopobindError(
            f"nothing to report: every host has no more than --warmup {opts.warmup} runs; "
            "lower --warmup or add runs"
        )
    has_matrices = any(r.matrices for r in good)
    return Report(
        options=opts,
        inputs=inputs,
        files=files,
        documents=len(runs),
        no_headline=no_headline,
        invalid=invalid,
        generated=sum(1 for r in runs if r.generated),
        groups=tuple(groups),
        pages=tuple(_page_comparisons(groups)),
        matrices=tuple(_matrix_groups(groups)) if has_matrices else (),
        not_judged=not_judged,
        cause_views=collect_cause_views(groups),
    )


def _judged(runs: Iterable[Result]) -> tuple[list[Result], dict[str, int]]:
    """The runs whose figures judge performance, and the count of the others by tier (the
    smoke tier runs the kernels at their smallest size: nothing to compare hosts by)."""
    judged: list[Result] = []
    left: dict[str, int] = {}
    for r in runs:
        if r.measures_performance:
            judged.append(r)
        else:
            left[str(r.tier)] = left.get(str(r.tier), 0) + 1
    return judged, dict(sorted(left.items()))


def _not_judged_text(not_judged: dict[str, int]) -> str:
    """'24 results of the smoke tier' (several tiers: joined with 'and')."""
    return " and ".join(f"{plural(n, 'result')} of the {t} tier"
                        for t, n in not_judged.items())  # fmt: skip
