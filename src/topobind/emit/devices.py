"""What GPU plans (layout per-gpu) add to the launchers' flags: ``--gpu-bind=none`` for
srun, and the per-rank variables (``ranks[].env``), which only a per-rank step can set."""

from __future__ import annotations

from typing import TYPE_CHECKING

from topobind.errors import TopobindError
from topobind.topo.cpukinds import kind_names
from topobind.topo.devices import Gpu
from topobind.topo.gpus import RUNTIME_PLUGINS
from topobind.topo.topology import Topology, format_list

if TYPE_CHECKING:  # 'topobind show' prints devices and imports no plan model
    from topobind.plan.model import Plan

ENV_NOTE = (
    "each rank needs its own {names} (ranks[].env of the plan): 'topobind run' sets them per "
    "rank; for a hand-written launch, 'topobind plan -f rank-env' writes a wrapper that does"
)
GPU_BIND_NOTE = (
    "--gpu-bind=none: the plan's per-rank variables choose the GPUs, so Slurm must not also "
    "bind them (its --gpu-bind=closest would renumber the devices each rank sees)"
)


def has_devices(plan: Plan) -> bool:
    return any(r.gpus or r.env for r in plan.ranks)


def srun_extra(plan: Plan) -> tuple[list[str], list[str]]:
    """(extra srun arguments, notes) for a plan with devices."""
    if not has_devices(plan):
        return [], []
    return ["--gpu-bind=none"], [GPU_BIND_NOTE, *env_notes(plan)]


def env_notes(plan: Plan) -> list[str]:
    from topobind.plan.model import rank_envs  # here: show, which has no plan, imports none

    names = sorted({k for env in rank_envs(plan).values() for k in env})
    return [ENV_NOTE.format(names="/".join(names))] if names else []


def device_lines(plan: Plan) -> list[str]:
    """Text lines: each rank's GPUs, NIC and variables."""
    if not has_devices(plan):
        return []
    lines = [f"{'rank':>4}  {'GPUs (PCI bus id)':<32} {'NIC':<10} per-rank variables"]
    for r in plan.ranks:
        gpus = ",".join(f"{g.os}({g.pci})" for g in r.gpus) or "-"
        env = " ".join(f"{k}={v}" for k, v in r.env.items()) or "-"
        lines.append(f"{r.rank:>4}  {gpus:<32} {r.nic.os if r.nic else '-':<10} {env}")
    return lines


#: what gives the richest GPU inventory, for ``show`` when hwloc had no GPU plugin
PLUGIN_REMEDY = (
    "hwloc had no GPU runtime plugin (nvml, rsmi, levelzero) here: for UUIDs and runtime "
    "indexes from hwloc install its plugins (Debian/Ubuntu: libhwloc-contrib-plugins; "
    "hwloc built with --enable-nvml/--enable-rsmi/--enable-levelzero; Spack: hwloc+nvml, "
    "+rocm, +levelzero) or run topobind on the node itself (sysfs, procfs, NVML)"
)


def _gpu_line(g: Gpu) -> str:
    return (
        f"GPU {g.os} (index {g.index}, PCI {g.pci}, vendor {g.vendor}"
        + (f", {g.model}" if g.model else "")
        + (f", {g.uuid}" if g.uuid else "")
        + (f", MIG {','.join(g.mig)}" if g.mig else "")
        + f"): near {g.near}, PUs {format_list(g.pus) or 'none usable'}, "
        f"NUMA {format_list(g.numa) or '?'}; found by {g.source}"
    )


def show_lines(topo: Topology) -> list[str]:
    """``topobind show`` lines: every GPU (with where it was found) and NIC with its
    locality, the notes of the GPU inventory, and what to install when hwloc lacked its GPU
    plugins."""
    lines = [_gpu_line(g) for g in topo.devices.gpus]
    gpus = topo.devices.gpus
    sources = {s for g in gpus for s in g.sources}
    if gpus and not sources.intersection({*RUNTIME_PLUGINS, "NVML", "procfs", "ROCm SMI"}):
        lines.append("note: " + PLUGIN_REMEDY)
    if topo.devices.refusal:
        lines.append(f"note: GPUs not listed: {topo.devices.refusal}")
    lines.extend(f"note: {n}" for n in topo.devices.notes)
    for n in topo.devices.nics:
        also = ",".join(x for x in n.names if x != n.os)
        lines.append(
            f"NIC {n.os} ({n.kind}, PCI {n.pci}"
            + (f", also {also}" if also else "")
            + f"): near {n.near}, PUs {format_list(n.pus) or 'none usable'}, "
            f"NUMA {format_list(n.numa) or '?'}"
        )
    return lines


def show_json(topo: Topology) -> dict[str, object]:
    """``topobind show -f json``: GPUs, NICs and CPU kinds."""

    names = kind_names(topo)
    return {
        "gpus": [
            {
                "os": g.os,
                "names": list(g.names),
                "index": g.index,
                "pci": g.pci,
                "vendor": g.vendor,
                "model": g.model,
                "uuid": g.uuid,
                "mig": list(g.mig),
                "sources": list(g.sources),
                "near": g.near,
                "pus": list(g.pus),
                "numa": list(g.numa),
            }
            for g in topo.devices.gpus
        ],
        "nics": [
            {
                "os": n.os,
                "names": list(n.names),
                "kind": n.kind,
                "pci": n.pci,
                "near": n.near,
                "pus": list(n.pus),
                "numa": list(n.numa),
            }
            for n in topo.devices.nics
        ],
        "gpu_notes": [
            *topo.devices.notes,
            *([topo.devices.refusal] if topo.devices.refusal else []),
        ],
        "cpu_kinds": [
            {
                "index": i,
                "name": names[i],
                "efficiency": k.efficiency,
                "core_type": k.core_type,
                "pus": list(k.pus),
            }
            for i, k in enumerate(topo.cpu_kinds)
        ],
    }


#: the variables naming a rank's local rank, in the order rankexec reads them
#: (TB_LOCAL_RANK_VARS, libtb/src/tb_env.c; tests/emit/test_rank_env_wrapper.py holds the
#: two equal): each MPI's own first (an mpirun inside sbatch passes the batch step's
#: SLURM_LOCALID=0 to every rank), Slurm's, then the global ranks (one node)
LOCAL_RANK_VARS = (
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMIX_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "FLUX_TASK_LOCAL_ID",
    "SLURM_LOCALID",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "FLUX_TASK_RANK",
    "SLURM_PROCID",
)
#: rankexec's bound on a rank number (TB_MAX_RANK, libtb/include/tb/env.h)
_MAX_RANK = 100000000


def local_rank_sh(who: str) -> list[str]:
    """sh lines (of the wrapper ``who``: rank-env, numactl) setting ``r`` as rankexec chooses
    the local rank: the first of LOCAL_RANK_VARS that is set, none set: 0 (one process); a
    set value that is no plain decimal number (an empty one included) refused, as rankexec
    refuses it, not skipped for the next variable."""
    names = " ".join(LOCAL_RANK_VARS)
    return [
        "# the local rank as topobind's rankexec reads it: the first of these set (none: 0)",
        "n= r=0",
        f"for v in {names}; do",
        '  eval "[ \\"\\${$v+set}\\" ]" && { n=$v; eval "r=\\$$v"; break; }',
        "done",
        'case "$r" in',
        "''|*[!0-9]*) d=x ;;",
        '*) z="${r%%[!0]*}"; d="${r#"$z"}" ;;',  # d: r without its leading zeros
        "esac",
        f'if [ "$d" = x ] || [ "${{#d}}" -gt 9 ] || [ "${{d:-0}}" -gt {_MAX_RANK} ]; then',
        '  v=$(printf %s "$r" | cut -c1-40 | tr -c "[:print:]" "?")',
        f"  printf '%s\\n' \"topobind {who}: $n=$v is not a rank number (0 .. {_MAX_RANK}): "
        "the launcher's variable is unreadable; unset it or launch through topobind run\" >&2",
        "  exit 1",
        "fi",
        'r="${d:-0}"',
    ]


def rank_env_script(plan: Plan) -> str:
    """A POSIX sh wrapper exporting each local rank's variables (``ranks[].env``), for
    hand-written launch lines: ``srun ... ./select.sh ./app`` or ``mpirun ... ./select.sh
    ./app``. One ``sh`` per rank, no Python."""

    import shlex  # here: the sh wrapper alone quotes (show and a JSON plan import none)

    if not has_devices(plan):
        raise TopobindError(
            f"layout {plan.layout} sets no per-rank variables; -f rank-env is for --layout per-gpu"
        )
    lines = [
        "#!/bin/sh",
        f"# topobind per-rank variables: layout {plan.layout}, {plan.nranks} ranks per node, "
        f"{plan.topology.source}",
        "# usage: srun|mpirun ... THIS_FILE PROGRAM ARGS...",
        *local_rank_sh("rank-env"),
        'case "$r" in',
    ]
    for r in plan.ranks:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in r.env.items())
        lines.append(f"{r.rank}) export {exports} ;;" if exports else f"{r.rank}) ;;")
    lines += [
        f"*) echo \"topobind rank-env: local rank '$r' is not one of the plan's 0-"
        f'{plan.nranks - 1}" >&2; exit 1 ;;',
        "esac",
        'exec "$@"',
    ]
    return "\n".join(lines) + "\n"
