"""The memory placement (``ranks[].memory``) for hand-written launch lines: a ``numactl``
wrapper per local rank (``plan -f numactl``) and Slurm's ``--mem-bind`` where it can say it.

``topobind run`` applies the placement through its per-rank step (rankstep/rankexec.c), with
every launcher; these are for scripts that launch by themselves.
"""

from __future__ import annotations

from topobind.emit.devices import local_rank_sh
from topobind.plan.model import Plan
from topobind.topo.topology import format_list

NUMACTL_POLICY = {"bind": "--membind", "interleave": "--interleave", "preferred": "--preferred"}


def numactl_args(plan: Plan, rank: int) -> list[str]:
    """``numactl --physcpubind=CPUS --membind=NODES --`` for one rank (no memory option for
    ``none``; ``--preferred`` takes the rank's first node: numactl has one preferred node)."""
    r = plan.ranks[rank]
    argv = ["numactl", f"--physcpubind={format_list(r.cpus)}"]
    m = r.memory
    if m is not None and m.policy != "none":
        nodes = m.nodes[:1] if m.policy == "preferred" else m.nodes
        argv.append(f"{NUMACTL_POLICY[m.policy]}={format_list(nodes)}")
    return [*argv, "--"]


def numactl_script(plan: Plan) -> str:
    """A POSIX sh wrapper running each local rank under its ``numactl`` line:
    ``srun|mpirun ... ./numa.sh ./app``. Page sizes other than the kernel's need topobind's
    step (LD_PRELOAD shim, THP off): they are named in a comment."""
    import shlex

    pages = sorted({r.memory.pages for r in plan.ranks if r.memory and r.memory.pages != "thp"})
    lines = [
        "#!/bin/sh",
        f"# topobind numactl lines: layout {plan.layout}, {plan.nranks} ranks per node, "
        f"{plan.topology.source}",
        "# usage: srun --cpu-bind=none|mpirun --bind-to none ... THIS_FILE PROGRAM ARGS...",
    ]
    if pages:
        lines.append(
            f"# --pages {','.join(pages)} is applied by 'topobind run' only (its per-rank step)"
        )
    lines += [*local_rank_sh("numactl"), 'case "$r" in']
    for r in plan.ranks:
        lines.append(f'{r.rank}) exec {shlex.join(numactl_args(plan, r.rank))} "$@" ;;')
    lines += [
        f"*) echo \"topobind numactl: local rank '$r' is not one of the plan's 0-"
        f'{plan.nranks - 1}" >&2; exit 1 ;;',
        "esac",
    ]
    return "\n".join(lines) + "\n"


def srun_mem_bind(plan: Plan) -> tuple[str | None, str | None]:
    """(``--mem-bind=...`` or None, a note). Slurm binds (``map_mem``: one node per task,
    ``mask_mem``: several) or prefers one node (``prefer,map_mem``); it has no interleave."""
    mems = [r.memory for r in plan.ranks]
    if len(plan.topology.numa_nodes) + len(plan.topology.cpuless_numa) < 2:
        return None, None  # one NUMA node: every policy is the kernel's default
    if not mems or any(m is None for m in mems):
        return None, None
    policies = {m.policy for m in mems if m is not None}
    if policies == {"none"}:
        return None, None
    if len(policies) > 1 or "interleave" in policies:
        return None, (
            "srun's --mem-bind cannot interleave a task's memory over several NUMA nodes: "
            "launch with 'topobind run' (its per-rank step sets the policy) or "
            "'topobind plan -f numactl'"
        )
    nodes = [m.nodes for m in mems if m is not None]
    if policies == {"preferred"}:
        return "--mem-bind=prefer,map_mem:" + ",".join(str(n[0]) for n in nodes), None
    if all(len(n) == 1 for n in nodes):
        return "--mem-bind=map_mem:" + ",".join(str(n[0]) for n in nodes), None
    masks = ",".join(hex(sum(1 << i for i in n)) for n in nodes)
    return f"--mem-bind=mask_mem:{masks}", None
