"""Finding and reading sites: ``<site>/site.yaml`` in the folders of
:func:`topobind.paths.sites_dirs` (``$TOPOBIND_SITES_DIR``, the user's
``$XDG_CONFIG_HOME/topobind/sites``, the shipped ``site_configs/``; the first holding a name
wins) and its ``references.yaml`` (for a site shipped inside the installed package, the one in
the user's folder: calibrate never writes into the package), checked and built into a
:class:`~topobind.validation.sites.model.Site`."""

from __future__ import annotations

import difflib
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError
from topobind.paths import (
    in_package,
    location,
    reframe_results_default,
    sites_dirs,
    user_sites_dir,
)
from topobind.validation.sites.model import (
    Calibration,
    Environment,
    ExpectedNode,
    Hugepages,
    Partition,
    Provenance,
    Site,
    Target,
)
from topobind.validation.sites.paths import SITE_SCHEMA_ID
from topobind.validation.sites.schema import (
    SiteError,
    _display,
    _read_yaml,
    _semantic_problems,
    _target_problems,
    schema_problems,
)


# --- locations
def sites_dir() -> Path:
    """The main sites folder: ``$TOPOBIND_SITES_DIR``, else the shipped ``site_configs/``
    (the user's folder is read before it: :func:`topobind.paths.sites_dirs`)."""
    return sites_dirs()[0] if location("TOPOBIND_SITES_DIR") else sites_dirs()[-1]


def reframe_results_dir() -> Path:
    """Where ReFrame's reports, perflogs, database and stage/output trees go:
    ``$TOPOBIND_REFRAME_RESULTS`` when absolute (a relative one is ignored: ReFrame, which
    reads it too, may run in another directory), else :func:`reframe_results_default`."""
    return location("TOPOBIND_REFRAME_RESULTS") or reframe_results_default()


def site_names(directory: Path | None = None) -> list[str]:
    """The sites of ``directory``, or of every folder of :func:`topobind.paths.sites_dirs`."""
    names: set[str] = set()
    for base in [directory] if directory else sites_dirs():
        if base.is_dir():
            names.update(p.parent.name for p in base.glob("*/site.yaml"))
    return sorted(names)


def _site_file(name: str, directory: Path | None) -> Path:
    """``<folder>/<name>/site.yaml`` of the first folder holding it (else of the last)."""
    bases = [directory] if directory else sites_dirs()
    for base in bases:
        if (base / name / "site.yaml").exists():
            return base / name / "site.yaml"
    return bases[-1] / name / "site.yaml"


def _shown_dirs(directory: Path | None) -> str:
    return ", ".join(_display(d) for d in ([directory] if directory else sites_dirs()))


# --- building
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


CONFORMANCE_KEYS = (
    "memory_gib_per_numa",
    "hugepages_2m_per_numa",
    "hugepages_1g_per_numa",
    "gpus",
    "nics",
    "gpu_numa",
    "nic_numa",
    "numa_balancing",
    "thp",
    "governor",
)


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
        extra={k: doc[k] for k in CONFORMANCE_KEYS if k in doc} or None,
        hosts={str(k): dict(v) for k, v in doc["hosts"].items()} if doc.get("hosts") else None,
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
        if in_package(path):  # a shipped site: the user's measured references
            ref_path = user_sites_dir() / path.parent.name / doc["references"]
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
                load=dict(c["load"]) if c.get("load") else None,
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
    path = _site_file(name, directory)
    if not path.exists():
        known = site_names(directory)
        close = difflib.get_close_matches(name, known, n=1)
        raise TopobindError(
            f"no site {name!r} in {_shown_dirs(directory)} ("
            + (f"did you mean {close[0]!r}? " if close else "")
            + f"known sites: {', '.join(known) or 'none'}; site files are read from "
            "$TOPOBIND_SITES_DIR: set it to the directory holding <site>/site.yaml)"
        )
    return load_site_file(path)


def load_sites(directory: Path | None = None) -> list[Site]:
    """Every site of the directory; 'local' (which matches any host) last."""
    sites = [load_site(n, directory) for n in site_names(directory)]
    return sorted(sites, key=lambda s: (s.name == "local", s.name))


def valid_sites(directory: Path | None = None) -> tuple[list[Site], list[str]]:
    """The valid sites of the directory ('local' last) and one line for each invalid one: a
    broken site.yaml never stops the others from loading (detection, ReFrame's systems)."""
    good: list[Site] = []
    broken: list[str] = []
    for name in site_names(directory):
        try:
            good.append(load_site(name, directory))
        except SiteError as exc:
            why = str(exc) if "topobind site check" in str(exc) else (
                f"{exc} (topobind site check {name})")  # fmt: skip
            broken.append(f"site {name} left out: {why}")
    return sorted(good, key=lambda s: (s.name == "local", s.name)), broken


def detect_site(hostname: str | None = None, directory: Path | None = None) -> Site:
    host = hostname or socket.gethostname()
    found, broken = valid_sites(directory)
    for site in found:
        if site.matches_host(host):
            return site
    raise TopobindError(
        f"no site's hostnames match {host!r} in {_shown_dirs(directory)}; name one "
        "with --site (see topobind site list), or set $TOPOBIND_SITES_DIR to your sites"
        + (f" ({len(broken)} invalid site(s) left out: {broken[0]})" if broken else "")
    )
