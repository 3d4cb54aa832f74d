"""The Slurm queries of node acceptance, in one place: the partition's nodes and their states
(``sinfo``) and draining a
node (``scontrol update``, then ``scontrol show node`` to show what it did).

Every node name that reaches ``scontrol`` here is one literal node name
(:data:`topobind.validation.reframe_report.NODE_NAME`, never ``ALL``, a host list or a comma
list): which nodes may be drained at all is :func:`topobind.validation.verdict.drain_plan`'s.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from topobind.errors import TopobindError
from topobind.validation.reframe_report import NODE_NAME

TIMEOUT_S = 60


def _run(argv: list[str], timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TopobindError(f"{shlex.join(argv)} failed ({exc}); is Slurm reachable?") from None


def partition_of(access: Sequence[str]) -> str | None:
    """The partition the site's access options name (``-p P``, ``--partition=P``)."""
    part = None
    for opt in access:
        m = re.match(r"^(?:-p\s*|--partition[= ])(\S+)$", opt.strip())
        if m:
            part = m.group(1)
    return part


def partition_nodes(access: Sequence[str]) -> dict[str, str]:
    """{node: Slurm state} of the partition the site's access options name; only literal
    node names (a line sinfo would never print is left out)."""
    part = partition_of(access)
    argv = ["sinfo", "-h", "-N", "-o", "%N %t"] + (["-p", part] if part else [])
    done = _run(argv)
    if done.returncode != 0:
        raise TopobindError(f"{shlex.join(argv)} failed: {done.stderr.strip()[:300]}")
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if line.split():
            name, state = (line.split() + ["?"])[:2]
            if NODE_NAME.match(name):
                out[name] = state
    return out


def drain_command(node: str, reason: str) -> list[str]:
    """``scontrol update nodename=NODE state=drain reason="topobind: REASON"``; refuses
    anything but one literal node name."""
    if not NODE_NAME.match(node) or node.upper() == "ALL":
        raise TopobindError(f"{node!r}: not one node name; refusing to drain it (a host list, "
                            "ALL or a comma list would drain other nodes)")  # fmt: skip
    text = " ".join(reason.split())
    if len(text) > 200:  # slurmctld keeps reasons short; the full text is in the output
        text = text[:197] + "..."
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason=topobind: {text}"]


@dataclass(frozen=True)
class Drained:
    node: str
    ok: bool
    text: str  # what scontrol says now (State=..., Reason=...), or its error


def drain(node: str, reason: str) -> Drained:
    """Drain ``node`` and read back what Slurm shows for it."""
    cmd = drain_command(node, reason)
    done = _run(cmd)
    if done.returncode != 0:
        return Drained(node, False, f"{shlex.join(cmd)}: {done.stderr.strip()[:300]}")
    return Drained(node, True, node_state(node))


def node_state(node: str) -> str:
    """``State=... Reason=...`` of ``scontrol show node NODE``."""
    done = _run(["scontrol", "-o", "show", "node", node])
    state = re.search(r"\bState=(\S+)", done.stdout)
    reason = re.search(r"\bReason=(.*?)(?: \w+=|$)", done.stdout)
    if not state:
        return f"scontrol show node {node}: {(done.stderr or done.stdout).strip()[:200]}"
    return f"State={state.group(1)}" + (f" Reason={reason.group(1)}" if reason else "")
