"""What a site is, as topobind uses it: partitions, environments, the expected node,
hugepage needs, targets with provenance, the calibration record."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError, plural


# --- model
@dataclass(frozen=True)
class Provenance:
    kind: str  # measured | quoted
    date: str | None = None
    method: str | None = None
    host: str | None = None
    runs: int | None = None
    source: str | None = None
    note: str | None = None

    def text(self) -> str:
        if self.kind == "quoted":
            return f"quoted: {self.source}"
        bits = [f"measured {self.date}", self.method or ""]
        if self.host:
            bits.append(f"host {self.host}")
        if self.runs:
            bits.append(f"{self.runs} runs")
        return ", ".join(b for b in bits if b)


@dataclass(frozen=True)
class Target:
    check: str
    variant: str
    metric: str
    reference: float
    lower: float | None
    upper: float | None
    unit: str
    provenance: Provenance
    origin: str  # the file it was read from

    def reframe_tuple(self) -> tuple[float, float | None, float | None, str]:
        return (self.reference, self.lower, self.upper, self.unit)

    def tolerance_text(self) -> str:
        return tolerance_text(self.lower, self.upper)


def tolerance_text(lower: float | None, upper: float | None) -> str:
    lo = "-inf" if lower is None else f"{lower * 100:+.0f}%"
    hi = "+inf" if upper is None else f"{upper * 100:+.0f}%"
    return f"{lo}/{hi}"


@dataclass(frozen=True)
class Partition:
    name: str
    scheduler: str
    launcher: str
    access: tuple[str, ...] = ()
    environments: tuple[str, ...] = ("builtin",)
    max_jobs: int = 1
    exclusive: bool = False
    time_limit: str | None = None
    description: str = ""
    accounting: bool = True  # slurm: sacct works (ReFrame's 'slurm' backend; else 'squeue')

    @property
    def reframe_scheduler(self) -> str:
        if self.scheduler == "slurm" and not self.accounting:
            return "squeue"
        return self.scheduler


@dataclass(frozen=True)
class Environment:
    name: str
    description: str = ""
    cc: str = "gcc"
    cxx: str = "g++"
    ftn: str = "gfortran"
    cflags: tuple[str, ...] = ("-fopenmp",)
    modules: tuple[str, ...] = ()
    env_vars: dict[str, str] = field(default_factory=dict)


BUILTIN_ENVIRONMENT = Environment(
    name="builtin", description="the system compilers: gcc with -fopenmp"
)


@dataclass(frozen=True)
class ExpectedNode:
    packages: int
    numa_nodes: int
    l3_domains: int
    cores: int
    smt: int
    synthetic: str | None = None
    peak_gflops: float | None = None
    description: str = ""
    provenance: Provenance | None = None
    origin: str = ""
    #: conformance expectations beyond the counts (memory_gib_per_numa, hugepages_2m_per_numa,
    #: hugepages_1g_per_numa, gpus, nics, numa_balancing, thp, governor):
    # topobind.validation.conformance
    extra: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    #: HOSTLIST -> the keys that differ on those hosts (NHC-style per-host expectations)
    hosts: dict[str, dict[str, Any]] | None = field(default=None, compare=False, hash=False)

    def summary(self) -> str:
        return (
            f"{plural(self.packages, 'package')}, {plural(self.numa_nodes, 'NUMA node')}, "
            f"{plural(self.l3_domains, 'L3 domain')}, {plural(self.cores, 'core')}, SMT {self.smt}"
        )


@dataclass(frozen=True)
class Hugepages:
    pages_1g_per_numa: int = 0
    enforce_in: tuple[str, ...] = ()


@dataclass(frozen=True)
class Calibration:
    date: str
    host: str
    runs: int
    partition: str | None
    tags: str | None
    command: str | None
    settings: dict[str, Any]
    load: dict[str, Any] | None = None  # other processes' CPU use meanwhile (calibration.py)

    @property
    def busy(self) -> bool:
        return bool(self.load and self.load.get("busy"))

    def busy_text(self) -> str:
        """Why the references are suspect, or ''."""
        if not self.busy or not self.load:
            return ""
        return (
            f"calibrated on {self.date[:10]} while other processes kept "
            f"{self.load['others_cpus']:g} of {self.load['cpus']} CPUs busy (over "
            f"{100 * float(self.load.get('threshold', 0.25)):.0f} % of the CPU time)"
        )


@dataclass(frozen=True)
class Site:
    name: str
    description: str
    path: Path  # the site.yaml
    hostnames: tuple[str, ...]
    partitions: tuple[Partition, ...]
    environments: tuple[Environment, ...]
    node: ExpectedNode | None
    hugepages: Hugepages
    settings: dict[str, Any]
    targets: dict[tuple[str, str, str], Target]
    references_path: Path | None = None
    calibration: Calibration | None = None
    notes: tuple[str, ...] = ()  # non-fatal remarks (overridden targets, missing references)

    @property
    def directory(self) -> Path:
        return self.path.parent

    def partition(self, name: str) -> Partition:
        for p in self.partitions:
            if p.name == name:
                return p
        raise TopobindError(
            f"site {self.name!r} has no partition {name!r}; its partitions: "
            f"{', '.join(p.name for p in self.partitions)}"
        )

    def targets_for(self, check: str, variant: str) -> dict[str, Target]:
        return {m: t for (c, v, m), t in self.targets.items() if c == check and v == variant}

    def has_targets(self, check: str) -> bool:
        return any(c == check for (c, _v, _m) in self.targets)

    def matches_host(self, hostname: str) -> bool:
        return any(re.search(rx, hostname) for rx in self.hostnames)

    @property
    def all_settings(self) -> dict[str, Any]:
        """ReFrame variables: the site's, overridden by those the references were measured
        with (references are only valid for the sizes they were measured with)."""
        merged = dict(self.settings)
        if self.calibration is not None:
            merged.update(self.calibration.settings)
        return merged


def node_counts(topo: Any) -> dict[str, int]:
    """The counts an expected node names, from a :class:`topobind.topo.topology.Topology`."""
    return {
        "packages": len(topo.packages),
        "numa_nodes": len(topo.numa_nodes),
        "l3_domains": len(topo.l3_domains),
        "cores": len(topo.cores),
        "smt": int(topo.smt),
    }
