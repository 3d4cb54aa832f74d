"""``topobind site list`` and ``topobind site check SITE``."""

from __future__ import annotations

import argparse
import shlex
import socket
import sys
from pathlib import Path
from typing import Any

from topobind.cli.arguments import add_command
from topobind.errors import Problems, TopobindError
from topobind.topo.topology import load
from topobind.validation import sites
from topobind.validation.sites import node_counts

SITE_EPILOG = """\
A site is a directory site_configs/<site>/ with a site.yaml (schema topobind.site/1, see
docs/site-admins.md) and, once calibrated, a references.yaml. Site files are read from
$TOPOBIND_SITES_DIR (default: site_configs/ of the repository).

examples:
  topobind site list
  topobind site check betzy              # the file: schema, names, units, tolerances
  topobind site check local --live       # ... and this machine against its node: section
"""


def add_subparser(subparsers: Any) -> None:
    site = subparsers.add_parser(
        "site",
        help="list the sites and check a site's site.yaml",
        description="Site descriptions for the ReFrame checks: hosts, partitions, node, targets.",
        epilog=SITE_EPILOG,
    )
    sub = site.add_subparsers(dest="site_command", metavar="SUBCOMMAND")
    add_command(
        sub,
        "list",
        run_list,
        help="every site: description, partitions, node, targets, whether it matches this host",
        epilog=SITE_EPILOG,
    )
    check = add_command(
        sub,
        "check",
        run_check,
        help="check a site.yaml (and its references.yaml); explain every error and its fix",
        description=(
            "Check SITE's site.yaml against the schema and the checks' metrics and units. Each "
            "problem is printed as FILE: PATH: what is wrong (how to fix it). Exit status 0 when "
            "the site is valid, 2 when it is not, 1 when --live finds the node different."
        ),
        epilog=SITE_EPILOG,
    )
    check.add_argument("site", metavar="SITE", help="site name (directory under site_configs/)")
    check.add_argument(
        "--live",
        action="store_true",
        help="also compare this machine (topobind show) with the site's node: section",
    )
    check.add_argument(
        "--golden",
        metavar="XML",
        help="with --live: compare with this hwloc XML (or DIR/<host>.xml) instead of node:",
    )
    check.add_argument(
        "--drain",
        action="store_true",
        help="with --live: print the scontrol command that drains a non-conforming node",
    )
    check.add_argument("--apply", action="store_true", help="with --drain: run it")
    check.add_argument(
        "--metrics",
        metavar="FILE",
        help="with --live: write the verdict (ok or nonconforming) in the Prometheus text "
        "format to FILE (*.prom, atomically) for node_exporter's textfile collector",
    )
    site.set_defaults(func=lambda args: _usage(site))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _folders() -> str:
    from topobind.paths import sites_dirs

    return ", ".join(map(str, sites_dirs()))


def run_list(args: argparse.Namespace) -> int:
    host = socket.gethostname()
    names = sites.site_names()
    if not names:
        raise TopobindError(f"no sites in {_folders()} (each needs <site>/site.yaml)")
    matched = False
    rows = []
    for name in names:
        try:
            site = sites.load_site(name)
        except sites.SiteError as exc:
            rows.append((name, f"INVALID: {exc.problems[0]}", "", "", ""))
            continue
        measured = sum(1 for t in site.targets.values() if t.provenance.kind == "measured")
        quoted = len(site.targets) - measured
        here = ""
        if not matched and site.matches_host(host) and name != "local":
            here, matched = "<- this host", True
        rows.append(
            (
                name,
                site.description,
                ", ".join(f"{p.name} ({p.scheduler}/{p.launcher})" for p in site.partitions),
                site.node.summary() if site.node else "not described yet",
                f"{len(site.targets)} targets ({quoted} quoted, {measured} measured) {here}",
            )
        )
    for name, descr, parts, node, targets in rows:
        if name == "local" and not matched:
            targets += " <- this host"
        print(f"{name}: {descr}")
        if parts:
            print(f"  partitions: {parts}")
            print(f"  node: {node}")
            print(f"  {targets.rstrip()}")
    return 0


def _live_findings(site: Any, golden: str | None) -> tuple[str, list[str]]:
    """(this node's name, one line per way it differs from the site's node: or the XML)."""
    from topobind.validation import conformance

    topo = conformance.whole_node()  # the node's hardware, not this job's CPUs
    from topobind.topo.slurm_allocation import node_name

    host = conformance.node_name(node_name(), topo.hostname)
    facts = conformance.live_facts(topo)
    if golden:
        expected, where = conformance.golden_expected(Path(golden), host)
    elif site.node is None:
        block = "\n".join(
            f"  {k}: {facts[k]}" for k in ("packages", "numa_nodes", "l3_domains", "cores", "smt")
        )
        raise TopobindError(
            f"{site.path}: no node: section to compare {host} with; add what this node has "
            f"(if it is a good one), e.g.\nnode:\n{block}\n(or give a golden hwloc XML "
            "with --golden FILE)"
        )
    else:
        expected = conformance.expected_for(site.node, host)
        where = site.node.origin or str(site.path)
    found = conformance.findings(expected, facts, where)
    return host, [f.text(host) for f in found]


def _drain(host: str, lines: list[str], apply: bool) -> int:
    from topobind.validation import slurm

    reason = lines[0].split(": ", 1)[1] + (f" (+{len(lines) - 1} more)" if len(lines) > 1 else "")
    cmd = slurm.drain_command(host, reason)
    if not apply:
        print(shlex.join(cmd))
        print("(dry run: add --apply to drain it)")
        return 0
    done = slurm.drain(host, reason)
    if not done.ok:
        print(f"topobind: error: drain {host}: {done.text}", file=sys.stderr)
        return 1
    print(f"drained {host}: {done.text}")
    return 0


def _synthetic_problems(site: Any) -> list[str]:
    """node.synthetic must describe the same node as the counts."""

    node = site.node
    if node is None or not node.synthetic:
        return []

    try:
        counts = node_counts(load("synthetic:" + node.synthetic))
    except TopobindError as exc:
        return [f"{node.origin}: node.synthetic: hwloc cannot build it ({exc})"]
    return [
        f"{node.origin}: node.synthetic: describes {k} = {v} but node.{k} is "
        f"{getattr(node, k)} (make them agree)"
        for k, v in counts.items()
        if getattr(node, k) != v
    ]


def run_check(args: argparse.Namespace) -> int:
    if (args.golden or args.drain) and not args.live:
        raise TopobindError("--golden and --drain compare the live node: add --live")
    if args.apply and not args.drain:
        raise TopobindError("--apply runs the drain command: add --drain")
    if args.metrics is not None and not args.live:
        raise TopobindError("--metrics writes the live node's verdict: add --live")
    if args.metrics is not None:
        from topobind.validation import metrics

        metrics.check_path(args.metrics)

    try:
        site = sites.load_site(args.site)
    except sites.SiteError as exc:
        summary = (
            f"{len(exc.problems)} problem(s) in site {args.site}; see docs/site-admins.md for "
            "the format"
        )
        raise Problems(exc.problems, summary) from exc
    problems = _synthetic_problems(site)
    if problems:
        raise Problems(problems)
    print(f"{site.path}: valid ({sites.SITE_SCHEMA_ID})")
    print(f"site {site.name}: {site.description}")
    print(f"hostnames: {', '.join(site.hostnames)}")
    for p in site.partitions:
        extra = f", access {' '.join(p.access)}" if p.access else ""
        print(
            f"partition {p.name}: scheduler {p.scheduler}, launcher {p.launcher}, max_jobs "
            f"{p.max_jobs}{', exclusive' if p.exclusive else ''}{extra}"
        )
    if site.node:
        peak = f", peak {site.node.peak_gflops:g} GFLOP/s" if site.node.peak_gflops else ""
        print(f"node: {site.node.summary()}{peak} (from {site.node.origin})")
    else:
        print("node: not described (NodeCheck is skipped until topobind calibrate records it)")
    hp = site.hugepages
    enforce = f", enforced in {', '.join(hp.enforce_in)}" if hp.enforce_in else ""
    print(f"hugepages: {hp.pages_1g_per_numa} free 1 GiB pages per NUMA node{enforce}")
    if site.all_settings:
        print(
            "settings (ReFrame -S): "
            + ", ".join(f"{k}={v}" for k, v in sorted(site.all_settings.items()))
        )
    if site.calibration is not None and site.calibration.busy:
        print(f"calibration: BUSY NODE: references {site.calibration.busy_text()}")
    if site.targets:
        print(f"targets ({len(site.targets)}):")
        for (check, variant, metric), t in sorted(site.targets.items()):
            print(f"  {check}.{variant}.{metric}: {t.reference:g} {t.unit} {t.tolerance_text()}")
            print(f"    {t.provenance.text()}")
    else:
        print("targets: none")
    for note in site.notes:
        print(f"note: {note}")
    if args.live:
        host, live = _live_findings(site, args.golden)
        if args.metrics is not None:
            from topobind.validation import metrics

            nodes = metrics.from_conformance(host, live)
            metrics.write(args.metrics, metrics.render(nodes, [], site=site.name, partition=""))
        if live:
            sys.stdout.flush()  # what was printed above comes first
            if args.drain:
                _drain(host, live, args.apply)
            raise Problems(live, exit_status=1)
        against = args.golden or f"the node: section ({site.node.summary()})"  # type: ignore[union-attr]
        print(f"{host} conforms to {against}")
    return 0
