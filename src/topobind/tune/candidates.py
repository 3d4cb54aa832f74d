"""The candidates of ``topobind tune``: the lists the user gave, else what can differ on this
node for this job (the layouts that plan here, the memory policies that place differently
here, the page sizes that can be had, the ranks x threads splits of ``--cpus N``), each
planned through the one planning entry; candidates whose plans put every thread on the same
CPUs with the same memory policy and pages are one (the first, simplest, kept)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

from topobind.errors import TopobindError
from topobind.plan import layouts, memory, request
from topobind.plan.model import Plan
from topobind.plan.request import PlanRequest
from topobind.topo.memory_state import pool_sizes, read_small
from topobind.topo.topology import Topology
from topobind.tune.session import Candidate

#: candidates in one session at most (each costs a warm-up and min_runs runs)
MAX_CANDIDATES = 64
#: the THP setting of this kernel (``always [madvise] never``)
THP_FILE = "/sys/kernel/mm/transparent_hugepage/enabled"


class Planned(NamedTuple):
    candidate: Candidate
    plan: Plan | None  # None: the baseline


class Choices(NamedTuple):
    """The lists to combine (None: the defaults of this node) and the request's base."""

    layouts: tuple[str, ...] | None = None
    mems: tuple[str, ...] | None = None
    pages: tuple[str, ...] | None = None
    ranks: int | None = None
    threads: int | None = None
    cpus: int | None = None


def parse_list(text: str, option: str, known: Sequence[str] | None = None) -> tuple[str, ...]:
    """``--pages 4k,2M`` -> ("4k", "2M"): empty or unknown entries refused in one line."""
    items = tuple(dict.fromkeys(p.strip() for p in text.split(",")))
    if not text.strip() or any(not p for p in items):
        raise TopobindError(f"{option} {text!r}: an empty entry; give a comma-separated list, "
                            f"e.g. {option} {','.join((known or ['a', 'b'])[:2])}")  # fmt: skip
    if len(items) > MAX_CANDIDATES:
        raise TopobindError(f"{option}: {len(items)} entries; at most {MAX_CANDIDATES}")
    for p in items:
        if known is not None and p not in known:
            from topobind.errors import did_you_mean

            raise TopobindError(f"{option}: unknown entry {p!r}{did_you_mean(p, list(known))}; "
                                f"choose from {', '.join(known)}")  # fmt: skip
    return items


def parse_layouts(text: str) -> tuple[str, ...]:
    items = parse_list(text, "--layouts")
    for name in items:
        if name == "auto":
            raise TopobindError("--layouts: 'auto' is what tune decides; name real layouts")
        try:
            layouts.parse_layout(name)
        except TopobindError as exc:
            raise TopobindError(f"--layouts: {exc}") from None
    return items


def default_layouts(topo: Topology) -> tuple[str, ...]:
    """Every layout of the registry that needs no parameter and plans on this node."""
    gpus = bool(topo.devices.gpus)
    return tuple(
        lay.name for lay in layouts.REGISTRY if not lay.parameter and (gpus or not lay.needs_gpus)
    )


def default_mems(topo: Topology) -> tuple[str, ...]:
    """The policies that place differently here: on one NUMA node, only the default."""
    return ("local",) if len(topo.numa_nodes) <= 1 else ("local", "interleave", "none")


def default_pages(thp_file: str = THP_FILE) -> tuple[str, ...]:
    """The kernel's default pages, 4 KiB when THP is on by default, and the hugetlb sizes
    this kernel has a pool for (one with no free pages is left out when planned)."""
    out = ["thp"]
    if "[always]" in (read_small(thp_file) or ""):
        out.append("4k")
    sizes = pool_sizes()
    for label in ("2M", "1G"):
        if memory.HUGE_KIB[label] in sizes:
            out.append(label)
    return tuple(out)


def splits(cpus: int) -> list[tuple[int, int]]:
    """Every ranks x threads of ``cpus`` CPUs."""
    return [(r, cpus // r) for r in range(1, cpus + 1) if cpus % r == 0]


def plan_key(plan: Plan) -> tuple[object, ...]:
    """What makes two plans the same placement: every thread's CPUs, each rank's memory."""
    return tuple((r.places, r.memory) for r in plan.ranks)


def candidates(
    topo: Topology, choices: Choices, base: PlanRequest
) -> tuple[list[Planned], list[str]]:
    """The baseline and every distinct planned candidate; notes on what was left out.
    Candidates of lists the user gave must plan (else one line); defaults that do not plan
    here are left out with a note."""
    lays = choices.layouts or default_layouts(topo)
    mems = choices.mems or default_mems(topo)
    pages = choices.pages or default_pages()
    counts = splits(choices.cpus) if choices.cpus else [(choices.ranks, choices.threads)]
    out = [Planned(Candidate(None, ranks=counts[0][0], threads=counts[0][1]), None)]
    seen: set[tuple[object, ...]] = set()
    planned: set[str] = set()  # the user's list entries that planned at least once
    failed: dict[str, str] = {}  # an entry's first error
    notes: list[str] = []
    for (lay, mem, page), (ranks, threads) in itertools.product(
        itertools.product(lays, mems, pages), counts
    ):
        cand = Candidate(lay, mem, page, ranks, threads)
        entries = (f"--layouts {lay}", f"--mem {mem}", f"--pages {page}")
        try:
            plan = request.plan(topo, request.parse(lay, **request_fields(base, cand)))
        except TopobindError as exc:
            for e in entries:
                failed.setdefault(e, f"candidate {cand.name}: {exc}")
            notes.append(f"{cand.name}\0{exc}")
            continue
        planned.update(entries)
        key = plan_key(plan)
        if key in seen:
            continue
        seen.add(key)
        out.append(Planned(cand, plan))
        if len(out) > MAX_CANDIDATES:
            raise TopobindError(f"more than {MAX_CANDIDATES} distinct candidates; give shorter "
                                "--layouts/--mem/--pages lists")  # fmt: skip
    _every_given_planned(choices, planned, failed)
    notes = _grouped(notes)
    if len(out) < 2:
        raise TopobindError("no candidate plans on this node (" + (notes or ["?"])[0] + ")")
    return out, notes


def _grouped(notes: list[str]) -> list[str]:
    """One note per reason, naming the candidates it left out."""
    by_reason: dict[str, list[str]] = {}
    for note in notes:
        name, _, why = note.partition("\0")
        by_reason.setdefault(why, []).append(name)
    return [f"left out {', '.join(names)}: {why}" for why, names in by_reason.items()]


def _every_given_planned(choices: Choices, planned: set[str], failed: dict[str, str]) -> None:
    """An entry the user listed that planned in no candidate: its first error, one line."""
    for option, given in (("--layouts", choices.layouts), ("--mem", choices.mems),
                          ("--pages", choices.pages)):  # fmt: skip
        for value in given or ():
            entry = f"{option} {value}"
            if entry not in planned:
                raise TopobindError(failed.get(entry, f"{entry}: it does not plan here"))


def request_fields(base: PlanRequest, cand: Candidate) -> dict[str, object]:
    """The fields of ``base`` (the job's request) with the candidate's, for
    ``request.parse(cand.layout, **fields)``."""
    fields = base._asdict()
    for name in ("layout", "parameter"):
        del fields[name]
    fields.update(mem=cand.mem, pages=cand.pages, ranks=cand.ranks, threads=cand.threads)
    return fields
