"""The plan of a ``validate --each-node`` run as one Slurm job a node
(:mod:`topobind.validation.bundles`): the tier (quick, or smoke: the quick tier's checks at their
smallest size), the site's limits on queued jobs and the waves they make
(:mod:`topobind.validation.limits`), each node's time bound, the nodes not tested, and the faults
(a node whose job died or never started) folded into the verdicts.

The smoke tier (``--tags smoke``) runs every check of the quick tier at its smallest size (a
few MB, milliseconds of work): it judges configuration (binding, hugepages, conformance, a
kernel that runs and passes its own validation), never performance; it runs every node at
once, as every tier does (within the site's limits on queued jobs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError
from topobind.validation import bundles
from topobind.validation.bundles import NOT_STARTED, UNREACHABLE, Pass, PassSpec

__all__ = ["NOT_STARTED", "SMOKE_VARS", "UNREACHABLE", "Plan", "add_failures", "faulted",
           "one_pass", "plan"]  # fmt: skip

#: the smoke tier's sizes (the site's and the user's -S win): STREAM's arrays 1 MiB each
#: (2 trials, the kernel's least), DGEMM of order 128 twice (variability needs 2), the
#: latency chase at 1 MiB (3 trials of at least 0.01 s), core-to-core with one sample;
#: sanity-only checks once; the kernels' results say 'smoke' (``tier``: not judged)
SMOKE_VARS = {"StreamCheck.elements": "131072", "StreamCheck.quick_trials": "1",
              "StreamCheck.trials": "2", "StreamCheck.max_bytes_per_run": "64M",
              "DgemmCheck.n": "128", "DgemmCheck.reps": "2", "LatencyCheck.sizes": "1M",
              "LatencyCheck.min_time": "0.01", "LatencyCheck.quick_small": "",
              "C2CCheck.samples": "1", "C2CCheck.quick_samples": "1",
              "sanity_once": "true", "tier": "smoke"}  # fmt: skip


@dataclass
class Plan:
    """How the nodes' jobs run: the pass spec (without -n/--reruns), the notes said before."""

    spec: PassSpec
    notes: list[str] = field(default_factory=list)
    not_tested: dict[str, str] = field(default_factory=dict)  # node -> its state


def smoke_setvars(setvars: dict[str, str]) -> dict[str, str]:
    out = dict(setvars)
    for key, value in SMOKE_VARS.items():
        if key not in setvars and key.rpartition(".")[2] not in setvars:
            out[key] = value
    return out


#: the least time a node's bound may give one pass of a tier, whatever an earlier run took
#: (the checks' cost model where no run of them has timed them): a run's bound is 3x the time
#: a node took in the last complete, successful run, never below this. quick: twice the
#: 1 min 53 s a node of the local cluster took for the quick tier (issue 48: a failed run's
#: 7 s had given it a 60 s bound); full: DGEMM 1G alone ran 3:34 and HPL minutes a node, so
#: the bound without any run (bundles.DEFAULT_RUN_S); smoke: sizes of milliseconds of work
TIER_FLOOR_S = {"smoke": 60.0, "quick": 240.0, "full": bundles.DEFAULT_RUN_S}


def node_bound(site: Any, exp_per_node: float | None, tier: str = "") -> tuple[float, str]:
    """A node's time bound (s) and where it comes from: three times the time a node took in
    the last complete, successful run of these checks, at least the tier's floor
    (:data:`TIER_FLOOR_S`, 60 s for a tier not listed), within the site's node_budget."""
    from topobind.validation.progress import parse_duration

    budget = site.settings.get("node_budget")
    limit = parse_duration(budget, f"{site.path}: settings.node_budget") if budget else None
    floor = TIER_FLOOR_S.get(tier, 60.0)
    if exp_per_node is not None:
        bound = max(floor, 3 * exp_per_node)
        if limit is not None and bound > limit:
            return limit, f"node_budget {budget}"
        if bound == floor and tier in TIER_FLOOR_S:
            return bound, (f"the {tier} tier's least, over 3x the {exp_per_node:.0f} s a node "
                           "the last complete run took")  # fmt: skip
        return bound, f"3x the {exp_per_node:.0f} s a node the last complete run took"
    if limit is not None:
        return limit, f"node_budget {budget}"
    return bundles.DEFAULT_RUN_S, "no cost model yet"


def wave_of(lim: Any, nodes: int) -> int:
    """Nodes a wave: every node at once within the limits on queued jobs (``lim``:
    :func:`topobind.validation.limits.read_limits`). Each job holds its node, and nodes run
    side by side so that a burst of load lands on all of them alike (one node after another,
    the node that ran during the burst looked slow: max_jobs no longer orders the nodes)."""
    free = lim.free
    return nodes if free is None or free <= 0 or free >= nodes else free


def site_wave(site: Any, nodes: int) -> int:
    """:func:`wave_of` this site's limits now (its max_submit, Slurm's)."""
    from topobind.validation import limits

    return wave_of(limits.read_limits(site.settings.get("max_submit"), str(site.path)), nodes)


def expected(site: Any, req: Any, nodes: int, results: Path, wave: int | None = None) -> Any:
    """The expected time of the run (:func:`topobind.validation.progress.expected_run`), timed by
    an earlier complete, successful run of the same checks (tags, -n; a smoke session counts as
    smoke), ``wave`` nodes at a time (the site's max_submit)."""
    from topobind.validation import progress

    return progress.expected_run(site, req.partition, nodes, req.repeat, results,
                                 (req.tags, tuple(req.names or ())), SMOKE_VARS,
                                 wave)  # fmt: skip


def plan(site: Any, req: Any, states: dict[str, str], nodes: Sequence[str], results: Path,
         tier: tuple[str, dict[str, str], tuple[str, ...]]) -> Plan:  # fmt: skip
    """The run's plan: ``tier`` (ReFrame's -t, -S and exclusions), waves within the site's
    limits, time bound; refuses in one line a run that cannot be queued at all."""
    from topobind.validation import limits

    part = site.partition(req.partition)
    smoke = req.tags == "smoke"
    tags, setvars, exclusions = tier
    lim = limits.read_limits(site.settings.get("max_submit"), str(site.path))
    if lim.free == 0:
        raise TopobindError(f"no job can be queued: {limits.describe(lim)}; wait for those "
                            "jobs, or raise max_submit in the site's settings")  # fmt: skip
    wave = wave_of(lim, len(nodes))
    notes = list(lim.notes)
    if wave < len(nodes):
        notes.append(f"{len(nodes)} jobs (one a node) while {limits.describe(lim)}: waves of "
                     f"at most {wave}")  # fmt: skip
    exp = expected(site, req, len(nodes), results, wave)
    bound, why = node_bound(site, exp.per_node, req.tags)
    # a job not started within the node's whole bound (at most START_S) is NOT STARTED: a
    # site's short node_budget bounds the wait for a node too
    spec = PassSpec(site.name, req.partition, tuple(part.access), part.exclusive, tags,
                    tuple(req.names or ()), setvars,
                    ("-x", "NodeCheck", *exclusions),
                    wave, bound, min(bundles.START_S, bound))  # fmt: skip
    waves = -(-len(nodes) // wave)
    notes.append(f"{len(nodes)} node(s), one Slurm job a node a pass, {waves} wave(s) of at most "
                 f"{wave}; a node's bound {bound:.0f} s ({why}), "
                 f"{spec.start_s:.0f} s to start")  # fmt: skip
    if smoke:
        notes.append("smoke tier: the quick tier's checks at their smallest size; it judges "
                     "configuration (binding, hugepages, conformance, kernels that run), not "
                     "performance")  # fmt: skip
    usable = ("idle", "mix", "alloc", "comp")
    from topobind.topo import hostlist

    named = None if req.nodelist is None else set(hostlist.expand(req.nodelist))
    skipped = {n: s for n, s in states.items()  # of the partition, or of --nodelist
               if n not in nodes and s.rstrip("*~#!%$@^-") not in usable
               and (named is None or n in named)}  # fmt: skip
    if skipped:
        notes.append("not tested (down or drained before the run): "
                     + ", ".join(f"{n} ({s})" for n, s in skipped.items())
                     + f" [{hostlist.shown(list(skipped))}]")  # fmt: skip
    out = Plan(spec, notes, skipped)
    for line in out.notes:
        import sys

        print(f"topobind: {line}", file=sys.stderr, flush=True)
    return out


def one_pass(p: Plan, req: Any, nodes: Sequence[str], runs: int, results: Path,
             label: str) -> Pass:  # fmt: skip
    """One job a node on ``nodes``: ``runs`` runs of each check, interleaved, in the job."""
    extra = tuple(a for a in p.spec.extra)
    if runs > 1:
        extra += ("--reruns", str(runs - 1))
    spec = replace(p.spec, names=tuple(req.names or ()), extra=extra)
    show = None
    if req.quiet:
        show = _silent
    return bundles.node_pass(spec, nodes, Path(results), label, show)


def _silent(_text: str) -> None:
    return None


def add_failures(obs: Any, one: Pass) -> None:
    """The conformance findings and the faults of a pass, as failures of their nodes."""
    from topobind.validation.verdict import Failure

    for node, lines in one.findings.items():
        obs.failures += [Failure(node, "conformance", "-", line) for line in lines]
    for job in one.faults:
        obs.failures.append(Failure(job.node, job.fault, "-", job.reason))


def faulted(verdicts: Sequence[Any], one: Pass) -> list[Any]:
    """The verdicts with each faulted node's status UNREACHABLE or NOT STARTED (not SLOW,
    not a plain FAIL): what happened to its job, with the reason."""
    faults = {j.node: j for j in one.faults}
    return [replace(v, status=faults[v.node].fault, reasons=(faults[v.node].reason,))
            if v.node in faults else v for v in verdicts]  # fmt: skip
