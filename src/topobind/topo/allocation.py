"""The job's allocation, whichever resource manager made it: one record (:class:`Allocation`)
made once a command by an adapter (:func:`topobind.topo.manager.detect` picks it) and passed
to planning (the ranks a node), launch (the default launcher, the nodes, the node groups)
and verification.

The adapters are the only modules that read a resource manager's variables or run its tools:
:mod:`topobind.topo.slurm_allocation` (``SLURM_*``, ``scontrol``) and
:mod:`topobind.topo.flux_allocation` (``FLUX_*``, the job's resource set R). Without either,
the allocation is :data:`NONE` (this machine, no manager). Everything the record holds that
costs a tool's call (host names, each node's CPUs) is read on first use and kept, so planning
one node never runs ``scontrol`` or ``flux``; tests build the record directly.
"""

from collections.abc import Callable, Sequence
from typing import NamedTuple

from topobind.errors import TopobindError

#: Most nodes a job may span (Slurm's largest clusters have tens of thousands): bounds the
#: work on a hostile node count, per-node count or host list.
MAX_NODES = 1 << 16
#: Most tasks a node may run (Slurm's MAX_TASKS_PER_NODE is 512; room for more).
MAX_TASKS_PER_NODE = 1 << 16


class TasksPerNode(NamedTuple):
    count: int  # type: ignore[assignment]  # tasks on every node (hides tuple.count)
    source: str  # the variables it came from, for messages


class NodeShare(NamedTuple):
    """What the job holds on some of its nodes: the same task count and CPUs on each."""

    hosts: tuple[str, ...]  # the nodes, in the manager's order
    tasks: int  # tasks on each node (0: the manager names none)
    cpu_ids: frozenset[int]  # the job's CPUs on each node, the manager's ids (see machine_cpus)
    threads_per_core: int  # how the ids count PUs (0: unknown, the topology's; 1: whole cores)
    gpu_ids: frozenset[int] = frozenset()  # the job's GPUs on each node, when the manager says


def _none() -> None:
    return None


class Allocation:
    """What the resource manager gave this job (``manager``: ``none``, ``slurm`` or
    ``flux``): ``nodes``; the tasks a node the job asked for (:meth:`tasks_per_node`), its
    host names (:meth:`hostnames`) and its nodes grouped by share (:meth:`shares`), each
    read once on first use (they may run the manager's tools, and may raise
    :class:`~topobind.errors.TopobindError`); ``cpus_per_task`` (the CPUs a task the job
    asked for, as the manager wrote it; "" when none), ``workdir`` (the job's submit
    directory, shared by its nodes, or None),
    ``step_host`` (this node's name inside a job step, a task on one node; None in the batch
    script or outside a job), ``restricted`` (the manager does not confine a job to its
    CPUs: the plan must keep to :meth:`shares`' CPUs itself), ``in_job`` (this process is a
    task of a job, not the job's instance: the manager's launcher would start work outside
    the job's resources, e.g. Flux's ``flux run`` from a task of a ``flux run`` job; "" when
    not, else the job's id), ``job_id`` (the job this process runs in, as the manager names
    it: the one whose processes on this node are the job's own, not other work; "" when not
    known)."""

    __slots__ = ("manager", "nodes", "cpus_per_task", "workdir", "step_host", "restricted",
                 "in_job", "job_id", "_read", "_seen")  # fmt: skip

    def __init__(
        self,
        manager: str = "none",
        nodes: int = 1,
        *,
        tasks: Callable[[], TasksPerNode | None] = _none,
        hosts: Callable[[], list[str]] | None = None,
        shares: Callable[[], list[NodeShare] | None] = _none,
        cpus_per_task: str = "",
        workdir: str | None = None,
        step_host: str | None = None,
        restricted: bool = False,
        in_job: str = "",
        job_id: str = "",
    ) -> None:
        self.manager, self.nodes = manager, nodes
        self.cpus_per_task, self.workdir, self.step_host = cpus_per_task, workdir, step_host
        self.restricted, self.in_job, self.job_id = restricted, in_job, job_id
        self._read: dict[str, Callable[[], object]] = {
            "tasks": tasks,
            "hosts": hosts or (lambda: []),
            "shares": shares,
        }
        self._seen: dict[str, object] = {}

    def __repr__(self) -> str:
        return f"Allocation({self.manager!r}, nodes={self.nodes})"

    @property
    def inside(self) -> bool:
        """Inside a job or instance of a resource manager."""
        return self.manager != "none"

    def _once(self, what: str) -> object:
        if what not in self._seen:
            self._seen[what] = self._read[what]()
        return self._seen[what]

    def tasks_per_node(self) -> TasksPerNode | None:
        """Tasks a node the job asked for; None when it asked for no task count. Raises when
        its nodes hold different task counts (a plan describes one node)."""
        return self._once("tasks")  # type: ignore[return-value]

    def hostnames(self) -> list[str]:
        """The job's nodes in the manager's order (a rankfile spanning nodes needs them)."""
        return self._once("hosts")  # type: ignore[return-value]

    def shares(self) -> list[NodeShare] | None:
        """The job's nodes grouped by what it holds on them, in the manager's order; None on
        one node or when the manager says nothing of them."""
        return self._once("shares")  # type: ignore[return-value]


#: No resource manager: one node, this machine.
NONE = Allocation()


def machine_cpus(
    cores: Sequence[tuple[int, ...]],
    ids: frozenset[int],
    threads_per_core: int,
    node: str,
    manager: str = "Slurm",
) -> frozenset[int]:
    """The OS indexes of a manager's CPU ids ``ids`` on a node whose cores are ``cores`` (every
    core of the whole node, each as its PUs' OS indexes, both in hwloc's logical order).
    Slurm numbers a node's CPUs core by core in that order, ``ThreadsPerCore`` ids per core,
    the i-th id of a core being its i-th PU (slurmd's block map; ``slurmd -D -vvvvv`` prints
    it): id = core * ThreadsPerCore + thread, where slurmd counts the PUs of the node divided
    by its cores as threads per core. On a node configured with ThreadsPerCore=1 over SMT
    hardware, an id is a whole core; Flux's ids are cores (hwloc's logical index), given with
    ``threads_per_core`` 1. ``threads_per_core`` 0 (the manager did not say): the
    topology's."""
    hw_threads = max(1, sum(len(c) for c in cores) // max(1, len(cores)))
    threads_per_core = threads_per_core or hw_threads
    if threads_per_core not in (1, hw_threads):
        raise TopobindError(
            f"{manager} counts {threads_per_core} threads per core on {node} but its topology "
            f"has {hw_threads}: give topobind that node's hwloc XML (-t), or fix the node's "
            "ThreadsPerCore in slurm.conf"
        )
    out: set[int] = set()
    for cpu in sorted(ids):
        core, thread = divmod(cpu, threads_per_core)
        if core >= len(cores):
            raise TopobindError(
                f"{manager} gives the job CPU {cpu} on {node}, but the topology has only "
                f"{len(cores)} cores of {threads_per_core} thread(s) there: give topobind "
                "that node's hwloc XML (-t)"
            )
        pus = cores[core]
        if threads_per_core != hw_threads:  # ThreadsPerCore=1 over SMT: the whole core
            out.update(pus)
        elif thread < len(pus):  # a PU that is offline has no id to give (Slurm skips it)
            out.add(pus[thread])
    return frozenset(out)
