"""Flux's ``flux run`` (inside a Flux instance: ``flux start``, ``flux alloc``, ``flux batch``):
the plan's ranks on each of the allocation's nodes, each task bound by topobind's per-rank step.

``flux run -N NODES -n RANKS --exclusive -o cpu-affinity=off -o gpu-affinity=off`` asks for
whole nodes of the instance (topobind plans the node, or the cores the allocation holds there:
:mod:`topobind.topo.flux_allocation`), in block order (Flux's default task map: ranks 0..R-1 on
the first node), and switches Flux's own binding off, which would otherwise bind every task to
the cores Flux gave it and undo the plan's; the per-rank step (rankstep/bin/rankexec) binds
each task to its planned CPUs from its ``FLUX_TASK_LOCAL_ID`` line (a version 2 step file) and
exports its places and device variables. Flux's PMI (PMI-1 ``simple``, ``PMI_FD``) starts
MPICH-family programs; the caller's environment reaches every task (``flux run`` copies it).

Nodes holding different shares: refused (one launch cannot give different nodes different task
counts here: a plan per group needs a task map, which is not written yet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from topobind.launch.mpi_launchers.base import Launch, Launcher, Native

if TYPE_CHECKING:
    from collections.abc import Sequence

    from topobind.launch.shape import JobShape, RankStep
    from topobind.plan.model import Plan

#: the shell options that switch Flux's own binding off (topobind's step binds instead)
AFFINITY_OFF = ("-o", "cpu-affinity=off", "-o", "gpu-affinity=off")


class Flux(Launcher):
    name = "flux"
    help = "Flux's flux run (inside a Flux instance): topobind's per-rank step binds each task"
    package = "Flux (flux-core; 'make flux' builds it into build/flux/)"
    reframe = "local"  # ReFrame has no flux launcher: its flux scheduler starts the job script
    programs = ("flux",)
    needs_manager = "flux"
    local_rank_vars = ("FLUX_TASK_LOCAL_ID",)
    rank_vars = ("FLUX_TASK_RANK",)
    size_vars = ("FLUX_JOB_SIZE",)
    native = Native(
        masks="no (cpu-affinity=on|per-task|map:LIST: the job's cores, or an even split)",
        map_by="no (cpu-affinity=per-task splits the job's cores evenly)",
        rankfile="--taskmap (nodes only: block, cyclic, manual, hostfile)",
        memory="no",
        per_node="not yet in topobind (a task map per group)",
        adds="each task bound to its planned CPUs by the per-rank step (cpu-affinity off), "
        "exact OMP_PLACES, memory policy and device variables per rank",
    )

    def version_of(self, path: str) -> str:
        from topobind.errors import TopobindError
        from topobind.runner import capture

        status, out, _err = capture([path, "version"], 30, f"{path} version")
        first = (out.splitlines() or [""])[0][:200]
        if status != 0 or "commands:" not in first:
            raise TopobindError(f"{path} is not Flux's flux (its 'version' says {first!r})")
        return " ".join(first.split())

    def needs_step(self, plan: Plan) -> bool:
        return True  # Flux binds no task to a planned set: the step binds every rank

    def masks(self, plan: Plan) -> list[tuple[int, ...]]:
        return [r.cpus for r in plan.ranks]  # the step binds each rank to exactly these

    def plain(self, path: str | None, nodes: int, ranks: int, program: Sequence[str]) -> Launch:
        return Launch(
            argv=[path or "flux", "run", f"--nodes={nodes}", f"--ntasks={nodes * ranks}", *program],
            env={},
            launcher=self.name,
        )

    def command(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        env, files, prefix = step.parts(bind=True)
        nodes = max(1, shape.nodes)
        argv = [
            "flux", "run", f"--nodes={nodes}", f"--ntasks={shape.plan.nranks * nodes}",
            "--exclusive", *AFFINITY_OFF, *shape.extra_args, *prefix, *program,
        ]  # fmt: skip
        return Launch(
            argv=argv,
            env=env | dict(shape.runtime_env),
            launcher="flux",
            files=tuple(files),
            notes=[
                f"launching with flux run on {nodes} node(s), Flux's cpu-affinity and "
                "gpu-affinity off: the per-rank step binds each task"
            ],
            nodes=nodes,
        )
