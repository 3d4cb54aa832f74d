"""A failure common to the fleet is the site's, never a node's (``validate --each-node``).

The rule (:func:`split`): a failure is keyed by its check, its variant and its reason once
node names, paths and numbers are normalised (:func:`normalise`: a node's name becomes
``NODE``, a path keeps only its last part, ``.../stream``, a number becomes ``N``). A key
that failed on at least :data:`MIN_SITE_NODES` of the judged nodes AND on more than half of
them (:data:`SITE_SHARE`) is a site problem: said once, with its fix where the reason is a
known one (:data:`FIXES`: "the checks' programs are not built: run make setup"), and taken
out of the nodes' failures. It drains nothing; a node whose only failures were the site's
is NOT JUDGED on them (never ok: the check did not run there). The command's exit status is
:data:`SITE_PROBLEM_STATUS` when no node is bad (docs/reference/exit-status.md).

The judged nodes are those that gave a result: a node whose job never started (NOT STARTED)
or died (UNREACHABLE) keeps its Slurm-side cause and counts neither way.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from topobind.validation.verdict import Failure, Observations

#: the exit status of an --each-node run whose worst finding is a failure every (or most)
#: judged node shares: the site's setup, not a node, is to be fixed; nothing is drained
SITE_PROBLEM_STATUS = 5
MIN_SITE_NODES = 3  # two nodes failing alike may be two bad nodes
SITE_SHARE = 0.5  # more than half of the judged nodes

#: failures that are no node's own: a fault of the node's job (its Slurm-side cause)
FAULTS = ("NOT STARTED", "UNREACHABLE")

#: known reasons: a regular expression on one node's reason (its group ``what``: the thing
#: named, e.g. the missing program) -> the fix said once for every check it hit
FIXES: tuple[tuple[str, str], ...] = (
    (r"(?:cannot run |bash: line \d+: )(?P<what>/\S+): No such file or directory",
     "the checks' programs are not built (or not where the checks look): run make setup, "
     "or point TOPOBIND_KERNELS_DIR at an installation's bin/"),
    (r"cannot run (?P<what>\S+): (?:Permission denied|Exec format error)",
     "the checks' programs cannot be executed on the nodes: build them for the nodes with "
     "make setup, on a file system the nodes mount with exec"),
    (r"No module named (?P<what>\S+)",
     "the nodes' Python lacks a module the checks import: install topobind's environment "
     "where the nodes see it (make setup)"),
    (r"(?P<what>does not compile C with OpenMP|no environment of partition \S+)",
     "the partition's programming environment does not compile C with OpenMP: fix the "
     "site's environs"),
)  # fmt: skip
GENERIC_FIX = ("the same failure on most nodes is the site's setup (the check's programs, the "
               "site file, the partition's environment), not the nodes': fix it, then run "
               "again")  # fmt: skip

_PATH = re.compile(
    r"(?<![\w./~])(?:(?:\.{1,2}|~)?/(?:[\w.+@%=-]+/)*|(?:[\w.+@%=-]+/){2,})"
    r"([\w.+@%=-]+)"
)
#: a word that may be a node name (node1, cn-001, gpu01.rack2), without a trailing dot
_WORD = re.compile(r"\w(?:[\w.-]*\w)?")
MAX_REASON = 2000  # characters of a reason compared (ReFrame's reasons are one line)
_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class SiteProblem:
    check: str
    variant: str
    reason: str  # one node's reason as it was given (the first node's)
    nodes: tuple[str, ...]  # the judged nodes it failed on
    judged: int  # the judged nodes
    fix: str

    @property
    def what(self) -> str:
        return self.check if self.variant in ("", "-") else f"{self.check} {self.variant}"

    def line(self) -> str:
        """'site problem: CHECK VARIANT failed on 3 of 3 judged nodes (HOSTLIST): REASON; FIX'"""
        from topobind.topo import hostlist

        return (f"site problem: {self.what} failed on {len(self.nodes)} of {self.judged} "
                f"judged nodes ({hostlist.shown(self.nodes)}): {self.reason[:300]}; "
                f"{self.fix}")  # fmt: skip


def lines(problems: Sequence[SiteProblem]) -> list[str]:
    """One line per site problem; those of one known fix (:data:`FIXES`: the programs missing
    for every check) in one line naming what each check missed:
    'site problem on 3 of 3 judged nodes (node[1-3]): FIX: WHAT (CHECK), WHAT (CHECK)'."""
    from topobind.topo import hostlist

    out: list[str] = []
    by_fix: dict[str, list[SiteProblem]] = {}
    for p in problems:
        if p.fix == GENERIC_FIX or not subject(p.reason):
            out.append(p.line())
        else:
            by_fix.setdefault(p.fix, []).append(p)
    for fix, group in by_fix.items():
        nodes = list(dict.fromkeys(n for p in group for n in p.nodes))
        named = ", ".join(dict.fromkeys(f"{subject(p.reason)} ({p.what})" for p in group))
        out.insert(0, f"site problem on {len(nodes)} of {group[0].judged} judged nodes "
                      f"({hostlist.shown(nodes)}): {fix}: {named}")  # fmt: skip
    return out


def subject(reason: str) -> str:
    """What a known reason names (the missing program), '' for any other reason."""
    for pattern, _fix in FIXES:
        m = re.search(pattern, reason)
        if m:
            return m.group("what")
    return ""


def normalise(reason: str, nodes: Collection[str]) -> str:
    """``reason`` (its first :data:`MAX_REASON` characters) with each node name of ``nodes``
    as NODE, each path as ``.../LAST`` and each number as N: two nodes' reasons for one
    failure are then the same text. One pass over the text, whatever the number of nodes."""
    names = nodes if isinstance(nodes, set | frozenset) else set(nodes)
    text = _WORD.sub(lambda m: "NODE" if m.group(0) in names else m.group(0),
                     reason[:MAX_REASON])  # fmt: skip
    text = _PATH.sub(lambda m: ".../" + m.group(1), text)
    return _NUMBER.sub("N", text)


def fix_for(reason: str) -> str:
    """The fix of a known reason (:data:`FIXES`), else :data:`GENERIC_FIX`."""
    for pattern, fix in FIXES:
        if re.search(pattern, reason):
            return fix
    return GENERIC_FIX


def is_site_wide(failed_on: int, judged: int) -> bool:
    """The rule: at least :data:`MIN_SITE_NODES` nodes and more than :data:`SITE_SHARE` of
    the judged ones."""
    return failed_on >= MIN_SITE_NODES and failed_on > SITE_SHARE * judged


Key = tuple[str, str, str]  # check, variant, normalised reason


def _key(f: Failure, judged: set[str]) -> Key | None:
    """A failure's key (check, variant, normalised reason); None for a node not judged or
    a fault of its job."""
    if f.check in FAULTS or f.node not in judged:
        return None
    return f.check, f.variant, normalise(f.reason, judged)


def find(failures: Sequence[Failure], judged: Collection[str],
         keys: Sequence[Key | None] | None = None) -> list[SiteProblem]:  # fmt: skip
    """The site problems among ``failures`` of the ``judged`` nodes (``keys``: each
    failure's :func:`_key`, when already made)."""
    judged = set(judged)
    if keys is None:
        keys = [_key(f, judged) for f in failures]
    groups: dict[Key, dict[str, str]] = {}
    for f, key in zip(failures, keys, strict=True):
        if key is not None:
            groups.setdefault(key, {}).setdefault(f.node, f.reason)
    out = []
    for (check, variant, _norm), by_node in groups.items():
        if is_site_wide(len(by_node), len(judged)):
            first = next(iter(by_node.values()))
            out.append(SiteProblem(check, variant, first, tuple(by_node), len(judged),
                                   fix_for(first)))  # fmt: skip
    return out


def split(obs: Observations, nodes: Sequence[str],
          faulted: Collection[str] = ()) -> list[SiteProblem]:  # fmt: skip
    """Find the site problems of ``obs`` over ``nodes`` (less the ``faulted`` ones, whose
    jobs gave no result) and move their failures out of ``obs.failures`` into
    ``obs.site_failed`` (node -> the site's checks it failed); returns them."""
    ran = set(obs.ran_on) | {f.node for f in obs.failures}
    judged = {n for n in nodes if n in ran and n not in faulted}
    keys = [_key(f, judged) for f in obs.failures]
    problems = find(obs.failures, judged, keys)
    if not problems:
        return []
    site = {(p.check, p.variant, normalise(p.reason, judged)) for p in problems}
    kept: list[Failure] = []
    for f, key in zip(obs.failures, keys, strict=True):
        if key in site:
            obs.site_failed.setdefault(f.node, set()).add(f.check)
        else:
            kept.append(f)
    obs.failures = kept
    obs.site_problems = problems
    return problems
