"""Slurm's ``srun``: one ``--cpu-bind=mask_cpu`` mask per task (:mod:`topobind.emit.srun`);
per-node plans as one plain step with ``SLURM_HOSTFILE`` whose per-rank step binds each rank.
Before launching an MPI program it makes sure srun starts MPI (:mod:`.slurm_mpi`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from topobind.launch.mpi_launchers.base import Emitted, Launch, Launcher, Native

if TYPE_CHECKING:
    from collections.abc import Sequence

    from topobind.launch.shape import JobShape, RankStep
    from topobind.plan.model import Plan


class Srun(Launcher):
    name = "srun"
    help = "Slurm's srun (inside an allocation): one --cpu-bind mask per task"
    package = "Slurm (Debian: slurm-client)"
    reframe = "srun"
    plan_format = "srun"
    programs = ("srun",)
    needs_manager = "slurm"
    local_rank_vars = ("SLURM_LOCALID",)
    rank_vars = ("SLURM_PROCID",)
    size_vars = ("SLURM_NTASKS",)
    native = Native(
        masks="yes (--cpu-bind=mask_cpu, one per task)",
        map_by="--distribution, --cpu-bind=cores|sockets|ldoms",
        rankfile="SLURM_HOSTFILE with --distribution=arbitrary (nodes only)",
        memory="--mem-bind (task/affinity)",
        per_node="one step over a host file; topobind's per-rank step binds",
        adds="exact OMP_PLACES per rank (rankexec), per-node plans, --mpi for MPI programs",
    )

    def version_of(self, path: str) -> str:
        import subprocess

        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, errors="replace", timeout=30
        )
        return done.stdout.strip()

    def command(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        from topobind.emit.srun import STEP_NOTE, srun_argv

        env, files, prefix = step.parts()
        s = srun_argv(shape.plan, nodes=shape.nodes)
        # The srun line is topobind's own (no -c/--exact/--hint, masks from the job's CPUs):
        # the advice for hand-written srun lines does not apply.
        notes = [n for n in s.notes if n != STEP_NOTE]
        return Launch(
            argv=[s.argv[0], *shape.extra_args, *s.argv[1:], *prefix, *program],
            env=env | dict(shape.runtime_env),
            launcher="srun",
            files=tuple(files),
            notes=notes,
            nodes=shape.nodes,
        )

    def plain(self, path: str | None, nodes: int, ranks: int, program: Sequence[str]) -> Launch:
        return Launch(
            argv=[path or "srun", f"--nodes={nodes}", f"--ntasks={nodes * ranks}", *program],
            env={},
            launcher=self.name,
        )

    def command_groups(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        """One plain srun step over every group's nodes. ``SLURM_HOSTFILE`` with
        ``--distribution=arbitrary`` puts the tasks in node order (each group's ranks per
        node), ``--cpu-bind=none`` leaves the binding to the per-rank step, whose one file
        holds a section per group: each rank binds itself to its planned CPUs and exports its
        places. (Not a heterogeneous step, ``srun A : B``: Slurm 22.05's srun can hang at the
        end of one under mpi/pmix, see docs/job-scripts.md.)"""
        nodes = sum(len(g.hosts) for g in shape.groups)
        hosts = [h for g in shape.groups for h in g.hosts for _ in range(g.plan.nranks)]
        env, hostfile, files = step.groups_launch("\n".join(hosts) + "\n")
        # The same count on every node overrides the job's SLURM_NTASKS_PER_NODE, which an
        # explicit --ranks may contradict (srun warns, then ignores it); different counts
        # cannot be said with it (srun warns that it ignores any).
        counts = {g.plan.nranks for g in shape.groups}
        per_node = [f"--ntasks-per-node={counts.pop()}"] if len(counts) == 1 else []
        argv = [
            "srun", *shape.extra_args, f"--nodes={nodes}", f"--ntasks={len(hosts)}", *per_node,
            "--distribution=arbitrary", "--cpu-bind=none", *step.argv(), *program,
        ]  # fmt: skip
        env = {**env, "SLURM_HOSTFILE": hostfile}
        return Launch(argv=argv, env=env, launcher="srun", files=files, nodes=nodes)

    def emit(self, plan: Plan, rankfile_path: str, host: str | None) -> Emitted:
        from topobind.emit.memory import srun_mem_bind
        from topobind.emit.srun import srun_argv

        s = srun_argv(plan)
        flag, note = srun_mem_bind(plan)
        argv = [*s.argv, *([flag] if flag else [])]
        return Emitted(argv=argv, notes=[*s.notes, *([note] if note else [])])
