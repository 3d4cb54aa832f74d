"""Slurm ``gres.conf`` lines for a node's GPUs, for site admins: with ``Cores=`` right,
Slurm's own ``--gpu-bind=closest`` picks the GPUs topobind's per-gpu layout picks.

``Cores=`` takes Slurm's logical core numbers: core 0 is the first core of the first socket,
in hwloc's logical order (``lstopo -l``), i.e. the ``logical`` index of
:class:`topobind.topo.topology.Core`. ``File=`` is the device file of the GPU's runtime index
(``/dev/nvidiaN``; ``/dev/dri/renderD<128+N>`` for AMD and Intel, or the render node hwloc
reported): check it against ``ls -l /dev/dri/by-path/pci-<bus id>-render`` on the node.
"""

from __future__ import annotations

from topobind.errors import TopobindError
from topobind.topo.devices import Gpu
from topobind.topo.topology import Topology, format_list


def device_file(gpu: Gpu) -> str:
    for name in gpu.names:
        if name.startswith("renderD"):
            return f"/dev/dri/{name}"
    if gpu.vendor == "10de":
        return f"/dev/nvidia{gpu.index}"
    return f"/dev/dri/renderD{128 + gpu.index}"


def gpu_cores(topo: Topology, gpu: Gpu) -> list[int]:
    """Slurm's logical numbers of the cores local to ``gpu``."""
    pus = set(gpu.pus)
    return [c.logical for c in topo.cores if pus.intersection(c.pus)]


def gres_conf(topo: Topology) -> str:
    """The ``gres.conf`` lines (with comments) for every GPU of ``topo``."""
    gpus = topo.devices.gpus
    if not gpus:
        raise TopobindError(
            f"{topo.source}: no GPU found (no NVIDIA, AMD or Intel GPU among its PCI devices); "
            "export the node's topology with I/O devices (lstopo-no-graphics --of xml)"
        )
    lines = [f"# gres.conf for {topo.hostname or topo.source} (topobind plan -f gres)"]
    if topo.excluded_pus:
        lines.append(
            "# WARNING: this topology lacks some PUs (cgroup or offline); Cores= are numbered "
            "among the usable cores only: export the topology outside any job for gres.conf"
        )
    lines.append("# Cores=: Slurm logical core numbers (lstopo -l 'Core L#'); File=: check")
    lines.append("# against ls -l /dev/dri/by-path/ (AMD, Intel) or nvidia-smi -q (NVIDIA)")
    for g in gpus:
        cores = gpu_cores(topo, g)
        if not cores:
            lines.append(f"# {g.os} ({g.pci}): no usable core near it, left out")
            continue
        lines.append(f"# {g.os} PCI {g.pci} near PUs {format_list(g.pus)}")
        lines.append(f"Name=gpu File={device_file(g)} Cores={format_list(cores)}")
    return "\n".join(lines) + "\n"
