"""Site descriptions (``site_configs/<site>/site.yaml``) and the ReFrame configuration derived
from them.

A site file says how a site's hosts are recognised (host name regular expressions), which
partitions it has (scheduler, launcher, access options, environments, concurrent jobs), the
node it expects (packages, NUMA nodes, L3 domains, cores, SMT), how many free 1 GiB pages the
checks need, and the performance targets of every check and variant: a reference value,
a tolerance (fractions, ``lower <= 0 <= upper``, as in ReFrame's reference tuples), a unit
and where the number comes from (``measured`` by calibration, or ``quoted`` from a named
source). Measured targets may live in a separate ``references.yaml`` written by
``topobind calibrate``; its targets override those of ``site.yaml``.

Files are checked against ``schemas/site.schema.json`` and a few rules the schema cannot
express; every problem is reported as ``FILE: PATH: what is wrong (how to fix it)``.

The one source of truth for ReFrame is :func:`reframe_site_configuration`, which
``site_configs/reframe_config.py`` exposes as ReFrame's ``site_configuration``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError
from topobind.words import plural

SITE_SCHEMA_ID = "topobind.site/1"
REFERENCES_SCHEMA_ID = "topobind.references/1"
REPO = Path(__file__).resolve().parents[2]
HUGEPAGES_1G_NR = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"


# --------------------------------------------------------------------------- checks registry
@dataclass(frozen=True)
class MetricSpec:
    unit: str
    higher_is_better: bool
    description: str


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
                _PCT_LOWER, False, "share of repetitions more than 5 % slower than the median"
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


# --------------------------------------------------------------------------- model
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


# --------------------------------------------------------------------------- locations
def sites_dir() -> Path:
    """``$TOPOBIND_SITES_DIR``, else ``site_configs/`` of this repository."""
    env = os.environ.get("TOPOBIND_SITES_DIR")
    return Path(env) if env else REPO / "site_configs"


def reframe_results_dir() -> Path:
    """Where ReFrame's reports, perflogs, database and stage/output trees go."""
    env = os.environ.get("TOPOBIND_REFRAME_RESULTS")
    return Path(env) if env else REPO / "results" / "reframe"


def site_names(directory: Path | None = None) -> list[str]:
    base = directory or sites_dir()
    if not base.is_dir():
        return []
    return sorted(p.parent.name for p in base.glob("*/site.yaml"))


# --------------------------------------------------------------------------- validation
class SiteError(TopobindError):
    """A site file is malformed; ``problems`` holds every ``FILE: PATH: message`` line."""

    def __init__(self, problems: list[str], site: str | None = None) -> None:
        more = ""
        if len(problems) > 1:
            more = f" (and {len(problems) - 1} more problems"
            more += f": topobind site check {site})" if site else ")"
        super().__init__(problems[0] + more)
        self.problems = problems


@lru_cache(maxsize=1)
def site_schema() -> dict[str, Any]:
    text = resources.files("topobind").joinpath("schemas/site.schema.json").read_text()
    doc: dict[str, Any] = json.loads(text)
    return doc


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _dotted(parts: Iterable[object]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _subschema(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        ref = schema["$ref"]
        node: Any = root
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _hint(schema: dict[str, Any], root: dict[str, Any]) -> str | None:
    sub = _subschema(schema, root)
    return schema.get("x-hint") or sub.get("x-hint")


def _describe(error: Any, root: dict[str, Any]) -> tuple[list[object], str]:
    """(path, 'problem (fix)') for one jsonschema error."""
    path = list(error.absolute_path)
    schema = error.schema
    hint = _hint(schema, root)
    kind = error.validator
    inst = error.instance
    if kind == "additionalProperties" and isinstance(inst, dict):
        allowed = sorted(schema.get("properties", {}))
        extras = [k for k in inst if k not in allowed]
        key = extras[0] if extras else "?"
        if allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            fix = (f"did you mean '{close[0]}'? " if close else "") + (
                f"allowed keys: {', '.join(allowed)}"
            )
        else:
            fix = hint or "remove it"
        return [*path, key], f"unknown key '{key}' ({fix})"
    if kind == "required":
        missing = re.search(r"'([^']+)' is a required property", error.message)
        key = missing.group(1) if missing else "?"
        sub_hint = None
        node: Any = error
        while node is not None and sub_hint is None:  # if/then branches: look at the parent
            props = _subschema(node.schema, root).get("properties", {})
            if key in props:
                sub_hint = _hint(props[key], root)
            node = node.parent
        if sub_hint is None and isinstance(inst, dict):  # a then-branch: find the definition
            for d in root.get("$defs", {}).values():
                props = d.get("properties", {})
                if key in props and set(inst) <= set(props):
                    sub_hint = _hint(props[key], root)
                    break
        return [*path, key], f"missing (add it: {sub_hint})" if sub_hint else "missing"
    if kind in ("maximum", "minimum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"maximum": "<=", "minimum": ">=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
        problem = f"must be {op[kind]} {error.validator_value}, got {inst!r}"
        return path, problem + (f" ({hint})" if hint else "")
    if kind == "type":
        want = error.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        problem = f"must be {'an' if str(want)[0] in 'aeiou' else 'a'} {want}, got {inst!r}"
        return path, problem + (f" ({hint})" if hint else "")
    if kind == "enum":
        choices = ", ".join(str(v) for v in error.validator_value)
        problem = f"{inst!r} is not one of: {choices}"
        return path, problem + (f" ({hint})" if hint else "")
    if kind == "const":
        problem = f"must be {error.validator_value!r}, got {inst!r}"
        return path, problem + (f" ({hint})" if hint else "")
    if kind == "pattern":
        return path, f"{inst!r} is not valid" + (f" ({hint})" if hint else "")
    if kind == "propertyNames":
        return path, f"{error.message}" + (f" ({hint})" if hint else "")
    if kind in ("minItems", "minLength"):
        return path, "must not be empty" + (f" ({hint})" if hint else "")
    return path, error.message + (f" ({hint})" if hint else "")


def schema_problems(doc: Any, display: str, which: str = "site") -> list[str]:
    """Every schema violation of ``doc`` as ``FILE: PATH: problem (fix)`` lines, in file order."""
    import jsonschema

    root = site_schema()
    schema = root if which == "site" else {"$ref": "#/$defs/references", "$defs": root["$defs"]}
    validator = jsonschema.Draft202012Validator(schema)
    errors = list(validator.iter_errors(doc))
    # if/then failures (a 'measured' provenance without a date) come as plain 'required' errors;
    # the deepest error of each branch is the most useful one.
    leaves: list[Any] = []
    for err in errors:
        if err.context:
            leaves.extend(e for e in err.context if not e.context)
        else:
            leaves.append(err)
    out: list[str] = []
    seen: set[str] = set()
    for err in sorted(leaves, key=lambda e: [str(p) for p in e.absolute_path]):
        path, message = _describe(err, root)
        line = f"{display}: {_dotted(path)}: {message}"
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out


def _target_problems(targets: Mapping[str, Any], display: str, prefix: str) -> list[str]:
    """Check names, variants, metrics and units against the checks registry."""
    out: list[str] = []
    for check, variants in targets.items():
        spec = CHECKS[check]
        for variant, metrics in variants.items():
            if variant not in spec.variants:
                close = difflib.get_close_matches(variant, spec.variants, n=1)
                out.append(
                    f"{display}: {prefix}.{check}.{variant}: unknown {spec.variant_kind} "
                    f"'{variant}' for check {check} ("
                    + (f"did you mean '{close[0]}'? " if close else "")
                    + f"known: {', '.join(spec.variants)})"
                )
                continue
            for metric, tgt in metrics.items():
                where = f"{display}: {prefix}.{check}.{variant}.{metric}"
                mspec = spec.metrics.get(metric)
                if mspec is None:
                    close = difflib.get_close_matches(metric, list(spec.metrics), n=1)
                    out.append(
                        f"{where}: check {check} reports no metric '{metric}' ("
                        + (f"did you mean '{close[0]}'? " if close else "")
                        + f"its metrics: {', '.join(spec.metrics)})"
                    )
                    continue
                if tgt.get("unit") != mspec.unit:
                    out.append(
                        f"{where}.unit: {tgt.get('unit')!r} is not the unit check {check} "
                        f"reports for {metric} (write the reference in {mspec.unit}: "
                        f"unit: {mspec.unit})"
                    )
    return out


def _semantic_problems(doc: dict[str, Any], display: str, dirname: str) -> list[str]:
    out: list[str] = []
    if doc.get("name") != dirname:
        out.append(
            f"{display}: name: {doc.get('name')!r} differs from its directory {dirname!r} "
            f"(rename one so they match: name: {dirname})"
        )
    for i, rx in enumerate(doc.get("hostnames", [])):
        try:
            re.compile(rx)
        except re.error as exc:
            out.append(
                f"{display}: hostnames[{i}]: {rx!r} is not a regular expression ({exc}; "
                "escape special characters, e.g. '^login-\\d+')"
            )
    env_names = {"builtin"} | {e["name"] for e in doc.get("environments", [])}
    names: set[str] = set()
    for i, part in enumerate(doc.get("partitions", [])):
        name = part.get("name")
        if name in names:
            out.append(
                f"{display}: partitions[{i}].name: partition {name!r} is defined twice "
                "(give each partition its own name)"
            )
        names.add(name)
        for j, env in enumerate(part.get("environments", [])):
            if env not in env_names:
                out.append(
                    f"{display}: partitions[{i}].environments[{j}]: unknown environment "
                    f"{env!r} (define it under environments: or use builtin)"
                )
        if "accounting" in part and part.get("scheduler") != "slurm":
            out.append(
                f"{display}: partitions[{i}].accounting: only means something with scheduler: "
                "slurm (remove it)"
            )
        if part.get("launcher") == "srun" and part.get("scheduler") != "slurm":
            out.append(
                f"{display}: partitions[{i}].launcher: srun needs scheduler: slurm "
                "(use launcher: local or mpirun with scheduler: local)"
            )
    out.extend(_target_problems(doc.get("targets", {}), display, "targets"))
    return out


def _read_yaml(path: Path) -> Any:
    import yaml

    display = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SiteError([f"{display}: cannot read: {exc.strerror}"]) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "?"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SiteError(
            [f"{display}: {where}: not valid YAML: {problem} (check indentation and quoting)"]
        ) from exc


# --------------------------------------------------------------------------- building
def _provenance(doc: Mapping[str, Any]) -> Provenance:
    return Provenance(
        kind=doc["kind"],
        date=str(doc["date"]) if doc.get("date") is not None else None,
        method=doc.get("method"),
        host=doc.get("host"),
        runs=doc.get("runs"),
        source=doc.get("source"),
        note=doc.get("note"),
    )


def _fraction(value: Any) -> float | None:
    return None if value is None else float(value)


def _targets(doc: Mapping[str, Any], origin: str) -> dict[tuple[str, str, str], Target]:
    out: dict[tuple[str, str, str], Target] = {}
    for check, variants in doc.items():
        for variant, metrics in variants.items():
            for metric, t in metrics.items():
                out[(check, variant, metric)] = Target(
                    check=check,
                    variant=variant,
                    metric=metric,
                    reference=float(t["reference"]),
                    lower=_fraction(t["tolerance"]["lower"]),
                    upper=_fraction(t["tolerance"]["upper"]),
                    unit=t["unit"],
                    provenance=_provenance(t["provenance"]),
                    origin=origin,
                )
    return out


def _node(doc: Mapping[str, Any] | None, origin: str) -> ExpectedNode | None:
    if not doc:
        return None
    return ExpectedNode(
        packages=doc["packages"],
        numa_nodes=doc["numa_nodes"],
        l3_domains=doc["l3_domains"],
        cores=doc["cores"],
        smt=doc["smt"],
        synthetic=doc.get("synthetic"),
        peak_gflops=doc.get("peak_gflops"),
        description=doc.get("description", ""),
        provenance=_provenance(doc["provenance"]) if doc.get("provenance") else None,
        origin=origin,
    )


def _partition(doc: Mapping[str, Any]) -> Partition:
    return Partition(
        name=doc["name"],
        scheduler=doc["scheduler"],
        launcher=doc["launcher"],
        access=tuple(doc.get("access", ())),
        environments=tuple(doc.get("environments", ("builtin",))),
        max_jobs=int(doc.get("max_jobs", 1)),
        exclusive=bool(doc.get("exclusive", doc["scheduler"] == "slurm")),
        time_limit=doc.get("time_limit"),
        description=doc.get("description", ""),
        accounting=bool(doc.get("accounting", True)),
    )


def _environment(doc: Mapping[str, Any]) -> Environment:
    return Environment(
        name=doc["name"],
        description=doc.get("description", ""),
        cc=doc.get("cc", "gcc"),
        cxx=doc.get("cxx", "g++"),
        ftn=doc.get("ftn", "gfortran"),
        cflags=tuple(doc.get("cflags", ("-fopenmp",))),
        modules=tuple(doc.get("modules", ())),
        env_vars={k: str(v) for k, v in doc.get("env_vars", {}).items()},
    )


def load_site_file(path: str | os.PathLike[str]) -> Site:
    """Read, check and build one site from its ``site.yaml`` (and its references file).

    Raises :class:`SiteError` listing every problem found.
    """
    path = Path(path)
    display = _display(path)
    doc = _read_yaml(path)
    if not isinstance(doc, dict):
        raise SiteError(
            [
                f"{display}: (top level): must be a mapping of keys (start with 'schema: "
                f"{SITE_SCHEMA_ID}')"
            ]
        )
    site_name = path.parent.name
    problems = schema_problems(doc, display, "site")
    if problems:
        raise SiteError(problems, site_name)
    problems = _semantic_problems(doc, display, site_name)
    if problems:
        raise SiteError(problems, site_name)

    targets = _targets(doc.get("targets", {}), display)
    node = _node(doc.get("node"), display)
    notes: list[str] = []
    calibration = None
    ref_path = None
    if doc.get("references"):
        ref_path = path.parent / doc["references"]
        if ref_path.exists():
            ref_display = _display(ref_path)
            ref = _read_yaml(ref_path)
            if not isinstance(ref, dict):
                raise SiteError([f"{ref_display}: (top level): must be a mapping of keys"])
            problems = schema_problems(ref, ref_display, "references")
            problems += _target_problems(ref.get("targets", {}), ref_display, "targets")
            if not problems and ref.get("site") != doc["name"]:
                problems.append(
                    f"{ref_display}: site: {ref.get('site')!r} but this file belongs to site "
                    f"{doc['name']!r} (re-run topobind calibrate --site {doc['name']})"
                )
            if problems:
                raise SiteError(problems, site_name)
            for key, tgt in _targets(ref.get("targets", {}), ref_display).items():
                if key in targets:
                    notes.append(
                        f"{'.'.join(key)}: measured reference in {ref_display} overrides the "
                        f"one in {display}"
                    )
                targets[key] = tgt
            measured_node = _node(ref.get("node"), ref_display)
            if node is None:
                node = measured_node
            elif measured_node is not None and node.peak_gflops is None:
                node = ExpectedNode(**{**node.__dict__, "peak_gflops": measured_node.peak_gflops})
            c = ref["calibration"]
            calibration = Calibration(
                date=str(c["date"]),
                host=c["host"],
                runs=c["runs"],
                partition=c.get("partition"),
                tags=c.get("tags"),
                command=c.get("command"),
                settings=dict(c.get("settings", {})),
            )
        else:
            notes.append(
                f"{_display(ref_path)} does not exist yet: no measured targets "
                f"(write them with: topobind calibrate --site {doc['name']})"
            )
    hp = doc.get("hugepages", {})
    return Site(
        name=doc["name"],
        description=doc["description"],
        path=path,
        hostnames=tuple(doc["hostnames"]),
        partitions=tuple(_partition(p) for p in doc["partitions"]),
        environments=tuple(_environment(e) for e in doc.get("environments", [])),
        node=node,
        hugepages=Hugepages(
            pages_1g_per_numa=int(hp.get("pages_1g_per_numa", 0)),
            enforce_in=tuple(hp.get("enforce_in", ())),
        ),
        settings=dict(doc.get("settings", {})),
        targets=targets,
        references_path=ref_path,
        calibration=calibration,
        notes=tuple(notes),
    )


def load_site(name: str, directory: Path | None = None) -> Site:
    base = directory or sites_dir()
    path = base / name / "site.yaml"
    if not path.exists():
        known = site_names(base)
        close = difflib.get_close_matches(name, known, n=1)
        raise TopobindError(
            f"no site {name!r} in {_display(base)} ("
            + (f"did you mean {close[0]!r}? " if close else "")
            + f"known sites: {', '.join(known) or 'none'})"
        )
    return load_site_file(path)


def load_sites(directory: Path | None = None) -> list[Site]:
    """Every site of the directory; 'local' (which matches any host) last."""
    sites = [load_site(n, directory) for n in site_names(directory)]
    return sorted(sites, key=lambda s: (s.name == "local", s.name))


def detect_site(hostname: str | None = None, directory: Path | None = None) -> Site:
    import socket

    host = hostname or socket.gethostname()
    for site in load_sites(directory):
        if site.matches_host(host):
            return site
    raise TopobindError(
        f"no site's hostnames match {host!r}; name one with --site (see topobind site list)"
    )


# --------------------------------------------------------------------------- ReFrame
def reframe_references(
    check: str, variant: str, sites: Iterable[Site] | None = None
) -> dict[str, dict[str, tuple[float, float | None, float | None, str]]]:
    """ReFrame ``reference`` of one check variant on every site: ``{'site': {metric: (ref,
    lower, upper, unit)}}``. Site targets hold for every partition of the site."""
    out: dict[str, dict[str, tuple[float, float | None, float | None, str]]] = {}
    for site in sites if sites is not None else load_sites():
        refs = {m: t.reframe_tuple() for m, t in site.targets_for(check, variant).items()}
        if refs:
            out[site.name] = refs
    return out


def node_counts(topo: Any) -> dict[str, int]:
    """The counts an expected node names, from a :class:`topobind.topology.Topology`."""
    return {
        "packages": len(topo.packages),
        "numa_nodes": len(topo.numa_nodes),
        "l3_domains": len(topo.l3_domains),
        "cores": len(topo.cores),
        "smt": int(topo.smt),
    }


def _processor(node: ExpectedNode | None) -> dict[str, int]:
    if node is None:
        return {}
    return {
        "num_cpus": node.cores * node.smt,
        "num_cpus_per_core": node.smt,
        "num_sockets": node.packages,
        "num_cpus_per_socket": node.cores * node.smt // node.packages,
    }


def reframe_site_configuration(
    directory: Path | None = None, results: Path | None = None
) -> dict[str, Any]:
    """ReFrame's ``site_configuration`` built from every site.yaml (one source of truth)."""
    res = (results or reframe_results_dir()).resolve()
    sites = load_sites(directory)
    systems: list[dict[str, Any]] = []
    environments: list[dict[str, Any]] = [
        {
            "name": BUILTIN_ENVIRONMENT.name,
            "cc": BUILTIN_ENVIRONMENT.cc,
            "cxx": BUILTIN_ENVIRONMENT.cxx,
            "ftn": BUILTIN_ENVIRONMENT.ftn,
            "cflags": list(BUILTIN_ENVIRONMENT.cflags),
            "cxxflags": list(BUILTIN_ENVIRONMENT.cflags),
            "features": ["openmp"],
            "extras": {"omp_flag": "-fopenmp"},
            # per system: replaces ReFrame's own 'builtin' without a redefinition warning
            "target_systems": [site.name for site in sites],
        }
    ]
    for site in sites:
        partitions = []
        for p in site.partitions:
            part: dict[str, Any] = {
                "name": p.name,
                "descr": p.description or f"{p.scheduler} scheduler, {p.launcher} launcher",
                "scheduler": p.reframe_scheduler,
                "launcher": p.launcher,
                "access": list(p.access),
                "environs": list(p.environments),
                "max_jobs": p.max_jobs,
                "extras": {"exclusive": p.exclusive, "topobind_launcher": p.launcher},
            }
            if p.time_limit:
                part["time_limit"] = p.time_limit
            proc = _processor(site.node)
            if proc:
                part["processor"] = proc
            partitions.append(part)
        systems.append(
            {
                "name": site.name,
                "descr": site.description,
                "hostnames": list(site.hostnames),
                "modules_system": "nomod",
                "prefix": str(res / "work"),
                "partitions": partitions,
            }
        )
        for env in site.environments:
            environments.append(
                {
                    "name": env.name,
                    "cc": env.cc,
                    "cxx": env.cxx,
                    "ftn": env.ftn,
                    "cflags": list(env.cflags),
                    "modules": list(env.modules),
                    "env_vars": [[k, v] for k, v in env.env_vars.items()],
                    "features": ["openmp"],
                    "target_systems": [site.name],
                }
            )
    perflog_format = (
        "%(check_job_completion_time)s|%(check_system)s|%(check_partition)s|"
        "%(check_environ)s|%(check_display_name)s|%(check_jobid)s|%(check_result)s|"
        "%(check_perfvalues)s"
    )
    return {
        "systems": systems,
        "environments": environments,
        "logging": [
            {
                "level": "debug",
                "handlers": [
                    {"type": "stream", "name": "stdout", "level": "info", "format": "%(message)s"},
                    {
                        "type": "file",
                        "name": str(res / "logs" / "reframe.log"),
                        "level": "debug2",
                        "format": "[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s",
                        "append": True,
                    },
                ],
                "handlers_perflog": [
                    {
                        "type": "filelog",
                        "basedir": str(res / "perflogs"),
                        "prefix": "%(check_system)s/%(check_partition)s",
                        "level": "info",
                        "format": perflog_format,
                        "format_perfvars": (
                            "%(check_perf_var)s=%(check_perf_value)s %(check_perf_unit)s "
                            "(ref %(check_perf_ref)s, %(check_perf_lower_thres)s/"
                            "%(check_perf_upper_thres)s)|"
                        ),
                        "append": True,
                    }
                ],
            }
        ],
        "general": [
            {
                "check_search_path": [str(REPO / "reframe_tests")],
                "report_file": str(res / "reports" / "run-report-{sessionid}.json"),
                "compress_report": False,
                "clean_stagedir": True,
            }
        ],
        "storage": [{"enable": True, "sqlite_db_file": str(res / "results.db")}],
    }
