"""What the Slurm SPANK plugin (``rankstep/topobind_spank.c``) asks of topobind, once
per node per step: the plan of this node's share as a version-2 per-rank step file.

``srun --topobind=LAYOUT`` makes slurmstepd run ``topobind plan --topology live
--slurm-cores CORES --ranks N --format rankexec ...`` on every node of the step, where
``CORES`` are the cores the step holds on that node in Slurm's numbering (SPANK's
``S_STEP_ALLOC_CORES``: core indexes in hwloc's logical order) and ``N`` its local tasks. The
plugin keeps the output in memory and gives each task its line: ``%cpus=`` (the task's
mask) and its variables (exact ``OMP_PLACES``, ``OMP_PROC_BIND``, ``OMP_NUM_THREADS``,
device variables), the format :mod:`topobind.launch.step_file` writes for
rankstep/rankexec.c.
"""

from __future__ import annotations

import os
import re

from topobind.errors import TopobindError
from topobind.launch.step_file import Section, planned_masks
from topobind.launch.step_file import step_text as file_text
from topobind.plan.model import Plan
from topobind.topo.topology import Topology, live_whole_xml, load, node_cores, parse_xml


def slurm_cores_topology(source: str, cores_text: str) -> Topology:
    """Topology ``source`` restricted to the PUs of Slurm's cores ``cores_text`` ("0-3,8"):
    core indexes counted over the whole node (PUs outside this process's cpuset included),
    in hwloc's logical order, as Slurm numbers them."""
    if source == "live":  # one lstopo run: the whole node (PUs outside this cpuset too)
        xml, hostname = live_whole_xml(), os.uname().nodename
    else:
        topo = load(source)
        if not topo.xml:
            raise TopobindError(f"--slurm-cores needs a topology with an XML; {source!r} has none")
        xml, hostname = topo.xml, topo.hostname or ""
    cores = node_cores(xml, source)
    ids = core_ids(cores_text, len(cores))
    pus = frozenset(pu for i in ids for pu in cores[i])
    return parse_xml(xml, source, hostname=hostname, job_cpus=pus)


def step_text(plan: Plan) -> str:
    """The plan as a version-2 step file for every host (``@*``): one line per local rank
    binding it to its planned CPUs (``%cpus=``: the masks srun would give) before its
    variables."""
    about = f"layout {plan.layout}; this node's share, one line per local rank"
    return file_text(about, [Section(("*",), plan, planned_masks(plan), comment="")])


def core_ids(text: str, ncores: int) -> list[int]:
    """Slurm's core list ``text`` ("0-3,8") checked against the node's ``ncores`` cores
    before it is expanded (a huge range is refused, never built)."""
    if not re.fullmatch(r"\d{1,9}(-\d{1,9})?(,\d{1,9}(-\d{1,9})?)*", text):
        raise TopobindError(f"--slurm-cores {text!r}: give a core list such as 0-3,8")
    ids: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if last >= ncores or first > last:
            raise TopobindError(
                f"--slurm-cores {text}: cores {part} are not on this node ({ncores} cores, "
                f"0-{ncores - 1}); is Slurm's node definition this hardware's?"
            )
        ids.extend(range(first, last + 1))
    return ids
