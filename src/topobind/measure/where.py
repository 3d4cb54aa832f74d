"""Where in a node: the NUMA node, socket link or core that the node's own matrices set apart
(issue 45 item 3; docs/explanation/causes.md, "Where").

A matrix is a result's ``matrices.NAME`` (:class:`topobind.measure.results.Matrix`): ``read_bw``
(MB/s, NUMA node of the threads x NUMA node of the memory), ``latency`` (ns, the same axes)
and ``c2c`` (ns, CPU x CPU). :func:`apart` compares like with like:

- **within the node** (no reference): each NUMA node's local element (the diagonal) with the
  other nodes' local elements; each NUMA node's row of remote elements (its CPUs reading the
  others' memory) and its column (its memory read from the others), as the median of the row or
  column, with the other rows' or columns' medians: every row holds the same mix of near and
  far nodes on a symmetric machine, so their medians compare like with like where the
  distances are not known (a memory-only node, HBM or CXL, is no peer of the others: only
  the nodes with CPUs are compared); each core's median core-to-core figure with the other
  cores';
- **against a reference** (the element-wise median of the fleet's other nodes' same matrix,
  :func:`fleet_reference`, or a node type's golden matrix of the same labels): the same
  groups, each against the reference's median of the same cells; then a single link apart
  whose two ends are not ("NUMA node 0 -> 4: ..., fleet ...: a socket link?").

The rule: within the node, a group's median is apart when it is worse than the other groups'
median (its peers) by more than max(:data:`MIN_RELATIVE` (20 %), :data:`MAD_FACTOR` x the peers'
scaled MAD / their median) (``stats.mad``: the peers' robust spread), with at least
:data:`MIN_PEERS` peers; against a reference (a median already, its spread not carried) by
more than :data:`MIN_RELATIVE`. Only the worse side names anything (a slow node's "where").
A node with one NUMA node, a matrix of fewer than 3 labels or too few measured elements
names nothing. Values that are missing, NaN, infinite, zero or negative are left out, never
raised on.

Pure: no file is read here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topobind.measure import stats
from topobind.measure.results import Matrix

MIN_RELATIVE = 0.20  # the smallest difference that names anything: noise names nothing
MAD_FACTOR = 3.0  # times the peers' scaled MAD (a standard deviation's estimate)
MIN_PEERS = 2  # a median and a spread need two peers (a 2-NUMA node cannot say which)
MAX_LABELS = 1024  # a hostile matrix is not read past this many labels a side
MAX_FOUND = 3  # findings said in a verdict
#: what a NUMA node's column and row are said as ('NUMA node 3: read bandwidth from the
#: other nodes' CPUs 0.35 GB/s, its peers 0.7')
FROM_OTHERS = " from the other nodes' CPUs"
TO_OTHERS = " of its CPUs to the other nodes' memory"

#: matrix name -> (what its value is, higher is better, the hint said with a local/column one)
KINDS: dict[str, tuple[str, bool, str]] = {
    "read_bw": ("read bandwidth", True, "a memory channel?"),
    "latency": ("latency", False, ""),
    "c2c": ("core-to-core", False, ""),
}


@dataclass(frozen=True, slots=True)
class Where:
    place: str  # 'NUMA node 5', 'core 7', 'NUMA node 0 -> 4'
    what: str  # 'read bandwidth', 'latency (remote, its CPUs)'
    value: float  # in the matrix's unit
    peers: float  # the peers' (or the fleet's) median
    unit: str
    slowdown: float  # stats.slowdown of value against peers
    against: str  # 'its peers' or 'fleet'
    hint: str = ""

    def text(self) -> str:
        """'NUMA node 5: read bandwidth 21 GB/s, its peers 41: a memory channel?'"""
        v, p, unit = _shown(self.value, self.peers, self.unit)
        out = f"{self.place}: {self.what} {v} {unit}, {self.against} {p}"
        return f"{out}: {self.hint}" if self.hint else out


def _shown(value: float, peers: float, unit: str) -> tuple[str, str, str]:
    if unit == "MB/s":
        value, peers, unit = value / 1000, peers / 1000, "GB/s"
    return _num(value), _num(peers), unit


def _num(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 10 else f"{v:.2g}"


def _ok(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) and f > 0 else None


Label = int | str
Cell = tuple[Label, Label]  # (row label, col label)


def _cells(m: Matrix) -> dict[Cell, float]:
    """The matrix's positive finite values by (row, col) label; {} when malformed."""
    rows, cols = m.rows[:MAX_LABELS], m.cols[:MAX_LABELS]
    n = len(m.cols)
    if len(m.values) < len(m.rows) * n:
        return {}
    out = {}
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            v = _ok(m.values[i * n + j])
            if v is not None:
                out[(r, c)] = v
    return out


def _groups(m: Matrix, cells: dict[Cell, float]) -> list[tuple[str, dict[Label, list[Cell]]]]:
    """Like with like: (what is compared, label -> its cells) of each kind of group. NUMA:
    the local element, the column (its memory from the other nodes), the row (its CPUs from
    the other nodes), only among the nodes with CPUs (the rows); c2c: each core's pairs."""
    if m.row_kind == m.col_kind == "cpu":
        core: dict[Label, list[Cell]] = {}
        for r, c in cells:
            if r != c:
                core.setdefault(r, []).append((r, c))
                core.setdefault(c, []).append((r, c))
        # a core of one partner (the checks' pair) cannot be told from it: its link is said
        return [("", {k: v for k, v in core.items() if len({x for p in v for x in p}) > 2})]
    if m.row_kind != "numa" or m.col_kind != "numa":
        return []
    nodes = set(m.rows[:MAX_LABELS]) & set(m.cols[:MAX_LABELS])
    local = {r: [(r, c)] for r, c in cells if r == c}
    col: dict[Label, list[Cell]] = {}
    row: dict[Label, list[Cell]] = {}
    for r, c in cells:
        if r != c and r in nodes and c in nodes:
            col.setdefault(c, []).append((r, c))
            row.setdefault(r, []).append((r, c))
    return [
        ("", local),
        (FROM_OTHERS, col),
        (TO_OTHERS, row),
    ]


def _is_apart(value: float, peers: Sequence[float], higher: bool) -> float | None:
    """The slowdown of ``value`` against ``peers`` when it is apart by the rule, else None."""
    if len(peers) < MIN_PEERS:
        return None
    mid = stats.median(peers)
    spread = MAD_FACTOR * stats.mad(peers, scaled=True) / mid
    worse = stats.slowdown(value, mid, higher)
    return worse if worse > max(MIN_RELATIVE, spread) else None


def _label(kind: str, label: Label) -> str:
    return f"NUMA node {label}" if kind == "numa" else f"core {label}"


def _found(m: Matrix, cells: dict[Cell, float], ref: dict[Cell, float] | None, what: str,
           higher: bool, hint: str) -> list[Where]:  # fmt: skip
    """Each label whose group's median is apart: from the other labels' medians of the same
    kind (``ref`` None), else from the reference's median of the same cells (the reference is
    a median already: only the rule's minimum difference applies)."""
    kind = "cpu" if m.row_kind == "cpu" else "numa"
    out: list[Where] = []
    named: set[Label] = set()
    for suffix, groups in _groups(m, cells):
        meds = {k: stats.median([cells[x] for x in v]) for k, v in groups.items() if v}
        for label, v in meds.items():
            if label in named:
                continue
            if ref is None:
                peers = [p for other, p in meds.items() if other != label]
                worse, against = _is_apart(v, peers, higher), "its peers"
                mid = stats.median(peers) if peers else math.nan
            else:
                theirs = [ref[x] for x in groups[label] if x in ref]
                mid = stats.median(theirs) if theirs else math.nan
                worse, against = (stats.slowdown(v, mid, higher) if theirs else None), "fleet"
                worse = worse if worse is not None and worse > MIN_RELATIVE else None
            if worse is not None:
                named.add(label)
                out.append(Where(_label(kind, label), what + suffix, v, mid, m.unit, worse,
                                 against, hint if suffix != TO_OTHERS
                                 else ""))  # fmt: skip
    if ref is not None:  # one link apart, its two ends not: 'a socket link?'
        said: set[Cell] = set()
        for (r, c), v in cells.items():
            if r != c and r not in named and c not in named and (r, c) in ref:
                if kind == "cpu" and (c, r) in said:  # c2c is symmetric: one link, said once
                    continue
                said.add((r, c))
                worse = stats.slowdown(v, ref[(r, c)], higher)
                if worse > MIN_RELATIVE:
                    out.append(Where(f"{_label(kind, r)} -> {c}", what, v, ref[(r, c)], m.unit,
                                     worse, "fleet", "a socket link?" if kind == "numa"
                                     else ""))  # fmt: skip
    return out


def apart(m: Matrix, reference: Matrix | None = None) -> list[Where]:
    """The places ``m`` sets apart, worst first: within the node when ``reference`` is None,
    else against it (same labels; the fleet's element-wise median, :func:`fleet_reference`).
    Never raises on a malformed matrix: it names nothing."""
    kind = KINDS.get(m.name)
    cells = _cells(m)
    if kind is None or not cells:
        return []
    what, higher, hint = kind
    ref = None if reference is None else _cells(reference)
    if ref is not None and not ref:
        return []
    return sorted(_found(m, cells, ref, what, higher, hint), key=lambda w: -w.slowdown)


def fleet_reference(others: Sequence[Matrix]) -> Matrix | None:
    """The element-wise median of the fleet's other nodes' same matrix (the labels of the
    first; an element measured on fewer than :data:`MIN_PEERS` nodes is not measured); None
    with fewer than :data:`MIN_PEERS` usable matrices."""
    from array import array

    usable = [(o, c) for o in others if (c := _cells(o))]
    if len(usable) < MIN_PEERS:
        return None
    first = usable[0][0]
    rows, cols = first.rows[:MAX_LABELS], first.cols[:MAX_LABELS]
    values = array("d")
    for r in rows:
        for c in cols:
            got = [cells[(r, c)] for _, cells in usable if (r, c) in cells]
            values.append(stats.median(got) if len(got) >= MIN_PEERS else math.nan)
    return Matrix(first.name, first.unit, rows, cols, first.row_kind, first.col_kind, values)


def where_text(mine: Mapping[str, Matrix], fleet: Mapping[str, Sequence[Matrix]]) -> str:
    """'where: NUMA node 5: read bandwidth 21 GB/s, its peers 41: a memory channel?; ...' of
    a node's matrices (name -> its matrix) and the fleet's other nodes' (name -> theirs): the
    fleet's reference where it has one, else the node's own peers; '' when nothing is apart."""
    found: list[Where] = []
    for name, m in mine.items():
        ref = fleet_reference(fleet.get(name, ()))
        found += apart(m, ref) if ref is not None else apart(m)
    found.sort(key=lambda w: -w.slowdown)
    return "where: " + "; ".join(w.text() for w in found[:MAX_FOUND]) if found else ""
