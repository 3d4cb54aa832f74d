"""The Plan: where every rank and every OpenMP thread of a job runs, in OS PU indexes.

One object, one JSON format (``docs/plan-format.md``, schema ``schemas/plan.schema.json``).
A plan knows nothing about launchers; :mod:`topobind.emit` turns it into flags.
"""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from topobind.errors import TopobindError
from topobind.fsutil import package_schema
from topobind.inputs import InputFile
from topobind.topo.devices import Gpu, Nic
from topobind.topo.topology import Topology, format_list

PLAN_SCHEMA_ID = "topobind.plan/1"


class MemoryPlacement(NamedTuple):
    """Where a rank's memory lives (planned by :mod:`topobind.plan.memory`): ``policy`` ``bind``,
    ``interleave``, ``preferred`` or ``none`` (the kernel's default) over NUMA nodes ``nodes``
    (OS indexes); ``pages``: ``4k``, ``2M``, ``1G`` or ``thp`` (the kernel's default)."""

    policy: str
    nodes: tuple[int, ...]
    pages: str = "thp"

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "nodes": list(self.nodes), "pages": self.pages}


#: no per-rank variables (a read-only mapping: a default shared by every rank)
_NO_ENV: Mapping[str, str] = MappingProxyType({})


class RankPlan(NamedTuple):
    """One MPI rank (or the single process of an OpenMP-only job).

    ``places[t]`` are the OS PU indexes thread ``t`` may run on; ``cpus`` is their union
    (the rank's binding set, OS indexes); ``cores`` and ``l3`` are hwloc logical indexes;
    ``numa`` are NUMA node OS indexes. A changed copy: ``rank._replace(...)``.
    """

    rank: int
    places: tuple[tuple[int, ...], ...]
    cores: tuple[int, ...]
    numa: tuple[int, ...]
    l3: tuple[int, ...]
    gpus: tuple[Gpu, ...] = ()  # per-gpu layout: the rank's GPUs (topobind.plan.gpu_layout)
    nic: Nic | None = None  # per-gpu layout: the NIC nearest the rank
    env: Mapping[str, str] = _NO_ENV  # per-rank variables
    memory: MemoryPlacement | None = None  # where its memory lives (topobind.plan.memory)

    @property
    def cpus(self) -> tuple[int, ...]:
        return tuple(sorted({pu for place in self.places for pu in place}))

    @property
    def threads(self) -> int:
        return len(self.places)


class Plan(NamedTuple):
    """Where every rank and thread of one node runs (the JSON form: docs/plan-format.md).
    A changed copy: ``plan._replace(...)``."""

    topology: Topology
    layout: str
    threads: int  # OpenMP threads per rank
    smt: bool  # threads use every PU of a core (True) or one PU per core (False)
    ranks: tuple[RankPlan, ...]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what the plan chose (CPU kinds, GPUs left out)

    @property
    def nranks(self) -> int:
        return len(self.ranks)

    def core_pus(self, rank: RankPlan) -> tuple[int, ...]:
        """Every usable PU of the cores the rank uses (what ``--bind-to core`` gives it)."""
        cores = self.topology.cores  # in logical order: cores[i].logical == i
        return tuple(sorted(pu for core in rank.cores for pu in cores[core].pus))

    def to_dict(self, launch: dict[str, Any] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": PLAN_SCHEMA_ID,
            "topology": self.topology.summary(),
            "layout": self.layout,
            "nranks": self.nranks,
            "threads": self.threads,
            "smt": self.smt,
            "ranks": [_rank_dict(r) for r in self.ranks],
            "warnings": list(self.warnings),
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if launch is not None:
            out["launch"] = launch
        return out


def _rank_dict(r: RankPlan) -> dict[str, Any]:
    cpus = r.cpus
    out: dict[str, Any] = {
        "rank": r.rank,
        "cpus": list(cpus),
        "cpus_list": format_list(cpus),
        "places": [list(p) for p in r.places],
        "cores": list(r.cores),
        "numa": list(r.numa),
        "l3": list(r.l3),
    }
    if r.gpus or r.nic is not None or r.env:
        out.update(_devices_dict(r))
    if r.memory is not None:
        out["memory"] = r.memory.to_dict()
    return out


def _devices_dict(r: RankPlan) -> dict[str, Any]:
    """``gpus``, ``nic`` and ``env`` of a rank of the per-gpu layout (nothing otherwise)."""
    if not r.gpus and r.nic is None and not r.env:
        return {}
    nic = {"os": r.nic.os, "pci": r.nic.pci, "kind": r.nic.kind} if r.nic else None
    return {
        "gpus": [{"os": g.os, "index": g.index, "pci": g.pci, "vendor": g.vendor} for g in r.gpus],
        "nic": nic,
        "env": dict(r.env),
    }


def rank_envs(plan: Plan) -> dict[int, dict[str, str]]:
    """rank -> the variables that rank alone must see (``ROCR_VISIBLE_DEVICES``,
    ``CUDA_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK``, ``UCX_NET_DEVICES``); empty for layouts
    without devices. For the per-rank launch step, prepared once on the batch host."""
    return {r.rank: dict(r.env) for r in plan.ranks if r.env}


def plan_schema() -> dict[str, Any]:
    return package_schema("plan.schema.json")


def validate_plan_json(doc: dict[str, Any]) -> None:
    """Raise TopobindError when ``doc`` does not follow the plan schema."""
    # jsonschema (~40 ms to import) only where a document is read back: a plan loads none
    import jsonschema

    try:
        jsonschema.validate(doc, plan_schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)[:100] or "(top)"
        message = " ".join(exc.message.split())
        message = message if len(message) <= 200 else message[:200] + "..."
        raise TopobindError(f"plan JSON invalid at {where}: {message}") from exc


class PlannedRank(NamedTuple):
    """A rank as read back from a plan JSON document (for verification and launchers)."""

    rank: int
    places: tuple[tuple[int, ...], ...]
    cpus: tuple[int, ...]
    env: Mapping[str, str] = MappingProxyType({})  # ranks[].env (read-only)
    gpus: tuple[str, ...] = ()  # ranks[].gpus[].pci: the bus ids the rank's runtime must show


def ranks_from_json(doc: dict[str, Any]) -> list[PlannedRank]:
    validate_plan_json(doc)
    return [
        PlannedRank(
            rank=int(r["rank"]),
            places=tuple(tuple(int(x) for x in p) for p in r["places"]),
            cpus=tuple(int(x) for x in r["cpus"]),
            env={str(k): str(v) for k, v in r.get("env", {}).items()},
            gpus=tuple(str(g["pci"]) for g in r.get("gpus", []) if g.get("pci")),
        )
        for r in doc["ranks"]
    ]


#: Largest plan JSON read back (one of 16384 ranks is ~4 MB).
MAX_PLAN_BYTES = 64 << 20


def read_plan_file(path: str) -> list[PlannedRank]:
    """The ranks of a plan JSON file (``topobind plan -f json``): a regular file of at most
    :data:`MAX_PLAN_BYTES`, valid JSON that follows the plan schema."""

    import json  # only where a plan is read back: printing one needs no json module (jsonfmt)

    fix = "give a plan written by 'topobind plan -f json'"
    text = InputFile("plan", MAX_PLAN_BYTES, fix).read_text(path)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = str(exc).splitlines()[0][:120] if str(exc) else "nested too deeply"
        raise TopobindError(f"plan {path[:200]!r} is not valid JSON ({why}); {fix}") from None
    if not isinstance(doc, dict):
        raise TopobindError(f"plan {path[:200]!r} is not a JSON object; {fix}")
    try:
        return ranks_from_json(doc)
    except TopobindError as exc:
        raise TopobindError(f"plan {path[:200]!r}: {exc}") from None
