"""The ``evidence`` section of a result document: what the node's own files and its hardware
counters said around the measured run (written by libtb, ``libtb/include/tb/evidence.h``;
``docs/results-format.md``, "evidence"; ``schemas/result.schema.json``, ``$defs/evidence``).

* :func:`read_evidence`: the one reader. A decoded document (or its ``evidence`` object) becomes
  an :class:`Evidence`, or None with a one-line reason: absent, or not as documented (a
  malformed section never raises). Bounded: at most :data:`MAX_ENTRIES` signals, events,
  reasons, CPUs and links are read, and every text is cut to :data:`MAX_TEXT` characters.
* :func:`evidence_of`: the same, the :class:`Evidence` alone.
* :meth:`Evidence.signal`, :meth:`Evidence.reason`, :meth:`Evidence.counter`,
  :attr:`Evidence.counters_available`, :attr:`Evidence.why`: what the verdicts' causes read;
  :func:`evidence_line`: the console's one line (``topobind bench``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

EVIDENCE_VERSION = 1
MAX_ENTRIES = 4096  # names in one object, CPUs, links: a node has at most a few thousand CPUs
MAX_TEXT = 300  # characters of one reason

#: the signals libtb writes (``docs/results-format.md``); a reader may meet others, kept as read
SIGNALS = (
    "busy_share", "steal_share", "throttled_share", "throttled_periods", "quota_cpus",
    "ctx_switches", "migrations", "minor_faults", "major_faults", "remote_page_share",
    "numa_miss", "numa_other_node", "compact_stall", "thp_fault_fallback", "swap_pages",
    "interrupts_on_cpus", "thermal_throttle_events", "clock_mhz", "clock_max_mhz",
    "effective_clock_ratio", "package_energy_j",
)  # fmt: skip
#: the counters libtb opens (``counters.events``; ``dram_bytes`` apart)
COUNTERS = (
    "cycles", "ref_cycles", "instructions", "llc_misses", "l2_lines_in", "dtlb_misses",
    "context_switches", "cpu_migrations", "page_faults",
)  # fmt: skip
HARDWARE_COUNTERS = COUNTERS[:6]


class EvidenceError(ValueError):
    """A section not as documented (one line); :func:`read_evidence` turns it into a reason."""


@dataclass(frozen=True)
class Link:
    """The PCIe link of a GPU or NIC: ``degraded`` when below its width or speed."""

    device: str
    kind: str
    speed_gts: float
    width: int
    max_speed_gts: float
    max_width: int
    degraded: bool


@dataclass(frozen=True)
class Counters:
    """``evidence.counters``: what perf_event_open counted; ``why``: why (the hardware) not."""

    available: bool
    why: str
    pmu: str
    events: dict[str, float]
    missing: dict[str, str]
    multiplexed: bool
    dram_bytes: tuple[float, float] | None = None  # (read, write), node-wide


@dataclass(frozen=True)
class Evidence:
    """One run's ``evidence`` (version 1). ``document``: the section as read, written back as
    it was by :func:`topobind.measure.results.result_document`."""

    window_s: float
    cpus: tuple[int, ...]
    signals: dict[str, float]
    unavailable: dict[str, str]
    counters: Counters
    links: tuple[Link, ...] = ()
    gpu_throttle: tuple[tuple[int, tuple[str, ...]], ...] = ()
    document: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def signal(self, name: str) -> float | None:
        """The signal's value, None when it was not read (:meth:`reason` says why)."""
        return self.signals.get(name)

    def reason(self, name: str) -> str | None:
        """Why signal or counter ``name`` is absent (None: it is there, or nothing was said)."""
        if name in self.unavailable:
            return self.unavailable[name]
        return self.counters.missing.get(name)

    def counter(self, name: str) -> float | None:
        """A counted event (``cycles``, ``llc_misses``, ...); ``dram_read``, ``dram_write``:
        bytes; None when it did not count (:meth:`reason`)."""
        if name in ("dram_read", "dram_write") and self.counters.dram_bytes is not None:
            return self.counters.dram_bytes[0 if name == "dram_read" else 1]
        return self.counters.events.get(name)

    @property
    def counters_available(self) -> bool:
        """At least one counter counted (software ones included)."""
        return self.counters.available

    @property
    def hardware_counters(self) -> tuple[str, ...]:
        """The hardware events that counted, in :data:`HARDWARE_COUNTERS` order."""
        return tuple(n for n in HARDWARE_COUNTERS if n in self.counters.events)

    @property
    def why(self) -> str:
        """Why the hardware counters (or all) did not count; "" when they did."""
        return self.counters.why


class EvidenceRead(NamedTuple):
    evidence: Evidence | None
    reason: str  # "" when read


# --------------------------------------------------------------------------- checks
def _text(v: object, what: str) -> str:
    if not isinstance(v, str):
        raise EvidenceError(f"{what} must be a string")
    return v[:MAX_TEXT]


def _number(v: object, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise EvidenceError(f"{what} must be a finite number")
    if v < 0:
        raise EvidenceError(f"{what} must not be negative")
    return float(v)


def _object(v: object, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise EvidenceError(f"{what} must be an object")
    if len(v) > MAX_ENTRIES:
        raise EvidenceError(f"{what} has {len(v)} entries, more than {MAX_ENTRIES}")
    return v


def _numbers(v: object, what: str) -> dict[str, float]:
    return {str(k): _number(x, f"{what}.{k}") for k, x in _object(v, what).items()}


def _texts(v: object, what: str) -> dict[str, str]:
    return {str(k): _text(x, f"{what}.{k}") for k, x in _object(v, what).items()}


def _list(v: object, what: str) -> list[Any]:
    if not isinstance(v, list):
        raise EvidenceError(f"{what} must be an array")
    if len(v) > MAX_ENTRIES:
        raise EvidenceError(f"{what} has {len(v)} entries, more than {MAX_ENTRIES}")
    return v


def _cpus(v: object) -> tuple[int, ...]:
    items = _list(v, "evidence.cpus")
    if not all(type(c) is int and c >= 0 for c in items):
        raise EvidenceError("evidence.cpus must list CPU numbers (integers >= 0)")
    return tuple(items)


def _flag(v: object, what: str) -> bool:
    if not isinstance(v, bool):
        raise EvidenceError(f"{what} must be true or false")
    return v


def _counters(v: object) -> Counters:
    c = _object(v, "evidence.counters")
    dram = c.get("dram_bytes")
    pair = None
    if dram is not None:
        d = _object(dram, "evidence.counters.dram_bytes")
        pair = (
            _number(d.get("read"), "dram_bytes.read"),
            _number(d.get("write"), "dram_bytes.write"),
        )
    return Counters(
        available=_flag(c.get("available"), "evidence.counters.available"),
        why=_text(c.get("why", ""), "evidence.counters.why"),
        pmu=_text(c.get("pmu", ""), "evidence.counters.pmu"),
        events=_numbers(c.get("events", {}), "evidence.counters.events"),
        missing=_texts(c.get("missing", {}), "evidence.counters.missing"),
        multiplexed=_flag(c.get("multiplexed", False), "evidence.counters.multiplexed"),
        dram_bytes=pair,
    )


def _link(v: object) -> Link:
    d = _object(v, "evidence.links[]")
    width, max_width = d.get("width"), d.get("max_width")
    if type(width) is not int or type(max_width) is not int:
        raise EvidenceError("evidence.links[].width and max_width must be integers")
    return Link(
        device=_text(d.get("device"), "evidence.links[].device"),
        kind=_text(d.get("kind"), "evidence.links[].kind"),
        speed_gts=_number(d.get("speed_gts"), "evidence.links[].speed_gts"),
        width=width,
        max_speed_gts=_number(d.get("max_speed_gts"), "evidence.links[].max_speed_gts"),
        max_width=max_width,
        degraded=_flag(d.get("degraded"), "evidence.links[].degraded"),
    )


def _throttle(v: object) -> tuple[int, tuple[str, ...]]:
    d = _object(v, "evidence.gpu_throttle[]")
    index, reasons = d.get("index"), _list(d.get("reasons"), "evidence.gpu_throttle[].reasons")
    if type(index) is not int:
        raise EvidenceError("evidence.gpu_throttle[].index must be an integer")
    return index, tuple(_text(r, "evidence.gpu_throttle[].reasons[]") for r in reasons)


def _evidence(section: object) -> Evidence:
    d = _object(section, "evidence")
    if d.get("version") != EVIDENCE_VERSION:
        raise EvidenceError(f"evidence.version is {str(d.get('version'))[:20]}, expected 1")
    if "counters" not in d:
        raise EvidenceError("evidence has no counters object")
    return Evidence(
        window_s=_number(d.get("window_s"), "evidence.window_s"),
        cpus=_cpus(d.get("cpus", [])),
        signals=_numbers(d.get("signals", {}), "evidence.signals"),
        unavailable=_texts(d.get("unavailable", {}), "evidence.unavailable"),
        counters=_counters(d.get("counters")),
        links=tuple(_link(x) for x in _list(d.get("links", []), "evidence.links")),
        gpu_throttle=tuple(
            _throttle(x) for x in _list(d.get("gpu_throttle", []), "evidence.gpu_throttle")
        ),
        document=d,
    )


# --------------------------------------------------------------------------- readers
def read_evidence(document: object) -> EvidenceRead:
    """The ``evidence`` of a result document (a decoded ``topobind.result/1`` object, or the
    ``evidence`` object itself when it has ``version``): :class:`EvidenceRead` with the
    :class:`Evidence`, or None and a one-line reason (absent; not as documented)."""
    if not isinstance(document, dict):
        return EvidenceRead(None, "not a JSON object")
    section = document if "version" in document and "schema" not in document else None
    if section is None:
        section = document.get("evidence")
    if section is None:
        return EvidenceRead(None, "no evidence in the result (a kernel built before it)")
    try:
        return EvidenceRead(_evidence(section), "")
    except EvidenceError as exc:
        return EvidenceRead(None, f"evidence not as documented: {exc}")


def evidence_of(document: object) -> Evidence | None:
    """The :class:`Evidence` of a result document, None when absent or malformed
    (:func:`read_evidence` says why)."""
    return read_evidence(document).evidence


def _pct(ev: Evidence, name: str) -> str:
    v = ev.signal(name)
    return "?" if v is None else f"{100 * v:.0f} %"


def counters_text(ev: Evidence) -> str:
    """``hardware (cycles, ...)``, ``software only (WHY)`` or ``none (WHY)``."""
    hw = ev.hardware_counters
    if hw:
        return (
            "hardware ("
            + ", ".join(hw)
            + ")"
            + (", multiplexed" if ev.counters.multiplexed else "")
        )
    if ev.counters_available:
        return f"software only ({ev.why or 'no hardware event counted'})"
    return f"none ({ev.why or 'no counter opened'})"


def evidence_line(ev: Evidence | None, reason: str = "") -> str:
    """The console's one line: ``evidence: busy 0 %, steal 0 %, throttled 0 %, counters: ...``."""
    if ev is None:
        return f"evidence: none ({reason or 'not recorded'})"
    parts = [f"busy {_pct(ev, 'busy_share')}", f"steal {_pct(ev, 'steal_share')}"]
    parts.append(f"throttled {_pct(ev, 'throttled_share')}")
    quota = ev.signal("quota_cpus")
    if quota is not None:
        parts.append(f"quota {quota:.2f} CPUs")
    degraded = [lk.device for lk in ev.links if lk.degraded]
    if degraded:
        parts.append("link degraded: " + ", ".join(degraded))
    return "evidence: " + ", ".join(parts) + ", counters: " + counters_text(ev)


def _worst(found: list[tuple[str, Evidence]], name: str) -> str:
    values = [(ev.signal(name), where) for where, ev in found if ev.signal(name) is not None]
    if not values:
        return "?"
    value, where = max(values, key=lambda v: v[0] or 0.0)
    return f"{100 * (value or 0.0):.0f} %" + (f" ({where})" if len(found) > 1 and value else "")


def ranks_line(ranks: Sequence[tuple[str, Evidence | None, str]]) -> str:
    """One line for the evidence of several ranks (``topobind run --evidence``), each given as
    (where: ``HOST rank N``, its evidence or None, the reason): the largest shares and where,
    the tightest quota, degraded links, the counters of the first, the ranks without any."""
    found = [(where, ev) for where, ev, _ in ranks if ev is not None]
    hosts = {where.split(" ", 1)[0] for where, _, _ in ranks}
    head = f"evidence: {len(ranks)} rank(s) on {len(hosts)} host(s)"
    if not found:
        reason = ranks[0][2] if ranks else "no rank wrote its evidence"
        return f"{head}: none ({reason})"
    parts = [f"busy max {_worst(found, 'busy_share')}", f"steal max {_worst(found, 'steal_share')}",
             f"throttled max {_worst(found, 'throttled_share')}"]  # fmt: skip
    quotas = [(ev.signal("quota_cpus"), w) for w, ev in found if ev.signal("quota_cpus")]
    if quotas:
        q, w = min(quotas, key=lambda x: x[0] or 0.0)
        parts.append(f"quota {q:.2f} CPUs ({w})")
    degraded = sorted({f"{w.split(' ', 1)[0]} {lk.device}" for w, ev in found for lk in ev.links
                       if lk.degraded})  # fmt: skip
    if degraded:
        parts.append("link degraded: " + ", ".join(degraded[:4]))
    missing = len(ranks) - len(found)
    tail = (
        f"; {missing} rank(s) without: {next(r for _, e, r in ranks if e is None)}"
        if missing
        else ""
    )
    return f"{head}: " + ", ".join(parts) + ", counters: " + counters_text(found[0][1]) + tail
