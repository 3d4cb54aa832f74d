"""The Flux adapter of :mod:`topobind.topo.allocation`: what a Flux instance or job holds
(nodes, host names, each node's cores and GPUs) from its resource set R (RFC 20), as the one
:class:`~topobind.topo.allocation.Allocation` record (:func:`allocation`). With the Slurm
adapter, the only module that reads ``FLUX_*`` for planning and launch.

Where R comes from: a task of a Flux job (``FLUX_JOB_ID`` set) reads its job's
(``flux job info $FLUX_JOB_ID R``); anything else inside an instance (``flux start``'s initial
program, a ``flux alloc``/``flux batch`` job, which is an instance of its own) reads the
instance's (``flux kvs get resource.R``: the resources the instance was given). Both are C
commands of flux-core (no Python start-up), run once a command, with a time and size bound;
R is untrusted: every field is checked and bounded (nodes, ids, host lists).

Flux's core ids are hwloc's logical core indexes (a core a id: ``threads_per_core`` 1 in
:func:`topobind.topo.allocation.machine_cpus`). Flux confines a job to its cores only when its
own ``cpu-affinity`` binds (topobind turns that off where it binds): the record says
``restricted``, and the plan keeps to the job's cores itself. A Flux job asks for nodes and
cores, not tasks a node (each ``flux run`` has its own count): the ranks a node are
``--ranks`` or the layout's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from topobind.errors import TopobindError
from topobind.topo.allocation import MAX_NODES, Allocation, NodeShare
from topobind.topo.topology import MAX_PUS, parse_list

#: Most bytes of R read from flux (R of 65536 nodes in R_lite form is well under this).
MAX_R_BYTES = 16 << 20
#: Seconds a flux command may take before it is abandoned.
TIMEOUT_S = 30
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$", re.ASCII)
_BRACKET = re.compile(r"^([^\[\]]*)\[([0-9,\-]{1,4096})\](.*)$", re.ASCII)


def in_flux(env: Mapping[str, str]) -> bool:
    """Inside a Flux instance (its initial program, a job, a job's task)."""
    return bool(env.get("FLUX_URI"))


def allocation(env: Mapping[str, str]) -> Allocation:
    """This Flux instance's or job's :class:`~topobind.topo.allocation.Allocation`, from R."""
    job = env.get("FLUX_JOB_ID", "")
    if job:
        # Flux's id forms (decimal, f58 'ƒ...', 0x hex, dotted hex, words) start with a letter,
        # a digit or 'ƒ': one starting with '-' would be an option of flux job info
        if not re.fullmatch(r"[0-9A-Za-z\u0192][0-9A-Za-z\u0192.\-]{0,63}", job):
            raise TopobindError(f"FLUX_JOB_ID={job[:40]!r} is not a Flux job id; unset it")
        args, what = ["job", "info", job, "R"], f"'flux job info {job} R'"
    else:
        args, what = ["kvs", "get", "resource.R"], "'flux kvs get resource.R'"
    text = _flux(args, what, env.get("FLUX_URI", ""))
    ranks = parse_r(text, what)
    hosts = [h for h, _, _ in ranks]
    return Allocation(
        "flux",
        len(ranks),
        hosts=lambda: hosts,
        shares=lambda: shares_of(ranks),
        step_host=_hostname() if env.get("FLUX_TASK_RANK") else None,
        restricted=True,
        in_job=job,
    )


def _flux(args: list[str], what: str, uri: str) -> str:
    """stdout of ``flux ARGS`` (:data:`TIMEOUT_S`); one line naming the command and
    ``FLUX_URI`` (what says this process is inside Flux: left over outside it, the fix is to
    unset it) when it fails. Its size is checked by :func:`parse_r`."""
    from topobind.errors import CannotRun
    from topobind.runner import capture

    failed = f"cannot read the Flux job's resources ({what}, FLUX_URI={uri[:80]!r}"
    outside = "or, outside Flux, unset FLUX_URI"
    try:
        status, out, err = capture(["flux", *args], TIMEOUT_S, what)
    except CannotRun as exc:
        raise TopobindError(f"{failed}: {exc}); put Flux's bin folder on PATH, {outside}") from exc
    if status != 0:
        why = (err.strip().splitlines() or [f"exit status {status}"])[-1]
        raise TopobindError(f"{failed}: {why[:200]}); is the instance running? {outside}")
    return out


def parse_r(text: str, what: str = "R") -> list[tuple[str, frozenset[int], frozenset[int]]]:
    """(host, core ids, GPU ids) of each broker rank of R version 1, in rank order; one line
    naming ``what`` and the field on anything else."""
    bad = f"the Flux resource set ({what})"
    if len(text) > MAX_R_BYTES:
        raise TopobindError(f"{bad} is over {MAX_R_BYTES} bytes")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise TopobindError(f"{bad} is not JSON: {str(exc)[:80]}") from exc
    execution = doc.get("execution") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(execution, dict):
        raise TopobindError(f"{bad} is not R version 1 (no 'execution')")
    lite, nodelist = execution.get("R_lite"), execution.get("nodelist")
    if not isinstance(lite, list) or not lite or len(lite) > MAX_NODES:
        raise TopobindError(f"{bad}: 'R_lite' is not a list of 1 to {MAX_NODES} entries")
    if not isinstance(nodelist, list) or not all(isinstance(h, str) for h in nodelist):
        raise TopobindError(f"{bad}: 'nodelist' is not a list of host lists")
    hosts = [h for entry in nodelist for h in expand_hostlist(entry, bad)]
    by_rank: dict[int, tuple[frozenset[int], frozenset[int]]] = {}
    for entry in lite:
        children = entry.get("children") if isinstance(entry, dict) else None
        rank = entry.get("rank") if isinstance(entry, dict) else None
        if not isinstance(rank, str) or not isinstance(children, dict):
            raise TopobindError(f"{bad}: an 'R_lite' entry lacks 'rank' or 'children'")
        cores = _ids(children.get("core", ""), f"{bad}: core ids of ranks {rank[:40]}")
        gpus = _ids(children.get("gpu", ""), f"{bad}: GPU ids of ranks {rank[:40]}")
        for r in _ids(rank, f"{bad}: ranks {rank[:40]}", MAX_NODES - 1):
            by_rank[r] = (cores, gpus)
    if len(by_rank) != len(hosts):
        raise TopobindError(
            f"{bad} names {len(by_rank)} broker ranks but {len(hosts)} hosts in 'nodelist'"
        )
    # nodelist lists the hosts of the ranks R holds, in increasing rank order
    return [(h, *by_rank[r]) for h, r in zip(hosts, sorted(by_rank), strict=True)]


def _ids(text: object, what: str, top: int = MAX_PUS - 1) -> frozenset[int]:
    if not isinstance(text, str) or len(text) > 65536:
        raise TopobindError(f"{what}: not an id list (e.g. 0-3,8)")
    if not text:
        return frozenset()
    return frozenset(parse_list(text, top, what))


def expand_hostlist(text: str, what: str = "a host list") -> list[str]:
    """RFC 29 host lists: ``node[0-2,5]`` -> node0 node1 node2 node5 (zero padding kept),
    comma-separated lists, several brackets; at most :data:`MAX_NODES` names."""
    out: list[str] = []
    for part in _split_top(text):
        out.extend(_expand_one(part, what, MAX_NODES - len(out)))
    return out


def _split_top(text: str) -> list[str]:
    """``a[1,2],b`` -> ``a[1,2]``, ``b``: split at commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _expand_one(text: str, what: str, room: int) -> list[str]:
    """The names of one host list part, at most ``room`` of them (several brackets multiply:
    ``n[0-60000][0-60000]`` is refused before its names are made, not after)."""
    if room < 1:
        raise TopobindError(f"{what} names more than {MAX_NODES} hosts")
    m = _BRACKET.match(text)
    if m is None:
        if not _HOST.match(text):
            raise TopobindError(f"{what}: {text[:60]!r} is not a host name")
        return [text]
    head, ranges, tail = m.groups()
    names: list[str] = []
    for r in ranges.split(","):
        lo, _, hi = r.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()) or len(lo) > 9 or len(hi) > 9:
            raise TopobindError(f"{what}: {text[:60]!r} has the range {r[:20]!r}")
        a, b = int(lo), int(hi or lo)
        if b < a or len(names) + b - a >= room:
            raise TopobindError(f"{what}: {text[:60]!r} names more than {MAX_NODES} hosts")
        names.extend(f"{head}{i:0{len(lo)}d}" for i in range(a, b + 1))
    out: list[str] = []
    for name in names:
        out.extend(_expand_one(name + tail, what, room - len(out)))
    return out


def shares_of(ranks: list[tuple[str, frozenset[int], frozenset[int]]]) -> list[NodeShare]:
    """Consecutive broker ranks holding the same cores and GPUs, as shares (no task count:
    Flux asks for none); refused when two brokers share a host (``flux start
    --test-size=N`` on one machine), where each broker holds the whole machine's cores."""
    seen: dict[str, int] = {}
    for host, _, _ in ranks:
        seen[host] = seen.get(host, 0) + 1
    doubled = [f"{h} ({n} brokers)" for h, n in seen.items() if n > 1]
    if doubled:
        raise TopobindError(
            f"the Flux instance runs several brokers on one host: {', '.join(doubled[:3])} "
            "(flux start --test-size=N?); each broker holds the same CPUs of that machine, "
            "so a plan a node would place two brokers' ranks on one PU: start one broker a "
            "node (srun -N N flux start), or --test-size=1"
        )
    out: list[NodeShare] = []
    for host, cores, gpus in ranks:
        last = out[-1] if out else None
        if last is not None and last.cpu_ids == cores and last.gpu_ids == gpus:
            out[-1] = last._replace(hosts=(*last.hosts, host))
        else:
            out.append(NodeShare((host,), 0, cores, 1, gpus))
    return out


def _hostname() -> str:
    import socket

    return socket.gethostname()
