#!/usr/bin/env python3
"""Regenerate docs/gpu.md and its pictures docs/img/gpu-*.png: the prose below plus the real
output of every command shown (run on the hwloc XMLs of ../shared/topologies).

    scripts/gen-gpu-doc.py            # write docs/gpu.md and the PNGs
    scripts/gen-gpu-doc.py --check    # exit 1 when either is stale (tests/cli/test_gpu_docs.py)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from docpaths import user_paths  # scripts/: this machine's paths -> a user's

REPO = Path(__file__).resolve().parents[1]
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
SHARED = Path(os.environ.get("TOPOBIND_SHARED", REPO.parent / "shared"))
SHOWN = "../shared"  # how the doc names the shared directory
TIOGA = f"{SHOWN}/topologies/gpu/mpibind-eas-tioga.xml"
LASSEN = f"{SHOWN}/topologies/gpu/mpibind-coral-lassen.xml"
KINDS = f"{SHOWN}/topologies/fakecpukinds.xml"
#: recorded on this project's 2-core machine (OpenMPI 5), see the Verify section
VERIFY_OUTPUT = "\n".join(
    [
        "CPU numbers are OS indexes; OK means on the planned CPU and bound to it.",
        "rank thread  host       planned      actual  affinity       status",
        "   0      0  vm         0                 0  0              OK",
        "   1      0  vm         1                 1  1              OK",
        "2 of 2 threads bound to their planned CPU",
        "rank  host       variable               planned      seen         status",
        "   0  vm         ROCR_VISIBLE_DEVICES   0            0            OK",
        "   0  vm         UCX_NET_DEVICES        mlx5_0:1     mlx5_0:1     OK",
        "   1  vm         ROCR_VISIBLE_DEVICES   1            1            OK",
        "   1  vm         UCX_NET_DEVICES        mlx5_0:1     mlx5_0:1     OK",
        "4 of 4 device variables as planned",
        "note: device variables checked as set per rank; the probe does not open a GPU "
        "runtime, so the device each rank then sees is not checked (this node has no GPU)",
    ]
)
LUMI = ["--ranks", "8", "--threads", "7", "--reserve", "first-core-per-l3"]


def _real(a: str) -> str:
    return a.replace(SHOWN, str(SHARED), 1) if a.startswith(SHOWN) else a


def run(
    *args: str,
    head: int | None = None,
    tail: int | None = None,
    ok: bool = True,
    start: str | None = None,
) -> str:
    """A console block: the command, its stdout, then its stderr (notes, errors)."""
    proc = subprocess.run(
        [TOPOBIND, *map(_real, args)], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert (proc.returncode == 0) == ok, (args, proc.stderr)
    lines = proc.stdout.rstrip("\n").splitlines() if proc.stdout.strip() else []
    if start is not None:  # an excerpt: from the first line holding ``start``
        lines = ["...", *lines[next(i for i, ln in enumerate(lines) if start in ln) :]]
    if head is not None and len(lines) > head:
        lines = lines[:head] + ["..."]
    if tail is not None and len(lines) > tail:
        lines = ["...", *lines[-tail:]]
    lines += proc.stderr.rstrip("\n").splitlines()
    if not ok:
        lines.append(f"$ echo $?\n{proc.returncode}")
    text = "\n".join(lines).replace(str(SHARED), SHOWN)
    return "```console\n$ topobind " + " ".join(args) + "\n" + text + "\n```\n"


def draw(args: list[str], name: str, outdir: Path) -> str:
    subprocess.run(
        [TOPOBIND, "draw", *map(_real, args), "-o", str(outdir / name)],
        capture_output=True,
        check=True,
        cwd=REPO,
    )
    shown = f"docs/img/{name}"
    return (
        "```console\n$ topobind draw " + " ".join([*args, "-o", shown]) + f"\nwrote {shown}\n```\n"
        f"\n![{name}](img/{name})\n"
    )


def document(img: Path) -> str:
    return f"""# GPU- and NIC-aware placement: the `per-gpu` layout

On a GPU node the binding question is "which cores, which GPU and which NIC for each rank".
`topobind` reads the node's GPUs and NICs from hwloc, plans ranks, threads, GPUs and NICs
together (`--layout per-gpu`), emits them for Slurm and OpenMPI, and `topobind verify` checks
each rank's CPUs and device variables. This page uses the HPE Cray EX235A node of
`../shared/topologies/gpu/mpibind-eas-tioga.xml` (the LUMI-G / Frontier node: one 64-core
EPYC in 8 L3 domains and 4 NUMA nodes, 8 MI250X GCDs `rsmi0..7`, 4 Slingshot NICs
`hsi0..3`). Every output below is real (`scripts/gen-gpu-doc.py` regenerates this page).

## Devices in the topology

GPUs and NICs are hwloc *OS devices* (`lstopo` lists them by default; `--whole-io` is not
needed). topobind recognises them by name, subtype and PCI class, never by the numeric
`osdev_type` (it differs between hwloc versions):

- GPUs: `rsmi*` (AMD ROCm SMI), `nvml*`/`cuda*` (NVIDIA), `ze*` (Intel Level Zero),
  `opencl*`; and, when hwloc had no GPU plugin, a DRM device (`card*`, `renderD*`) of a
  3D/display controller (PCI class 0302/0380) from AMD, NVIDIA or Intel. One physical GPU
  appears as several OS devices (`cuda0`, `nvml0`, `opencl0d0`): they are one GPU, grouped by
  PCI bus id and named after the vendor's runtime.
- The GPU's *index* is the number the vendor's runtime uses (`cudaN`/`nvmlN`, `rsmiN`,
  `zeN`): it goes into `CUDA_VISIBLE_DEVICES` (PCI vendor 10de), `ROCR_VISIBLE_DEVICES`
  (1002) or `ZE_AFFINITY_MASK` (8086). A GPU seen only through OpenCL or DRM gets its position
  on the PCI bus among the vendor's GPUs, and the plan says so in a note.
- NICs: `mlx5_*`, `mlx4_*`, `hfi1_*` (OpenFabrics: `UCX_NET_DEVICES=<hca>:1`), `cxi*`, `hsn*`,
  `hsi*` (Slingshot), `bxi*`; an IP interface on the same PCI device (`ib0`, `hsi0` of an
  `mlx5_0`) is the same NIC.
- Locality: the cpuset of the nearest non-I/O ancestor (an L3 domain on the EX235A, a package
  on POWER9), cut to the PUs this job may use; NUMA nodes from its nodeset.

{run("show", "-t", TIOGA)}
## The layout

`topobind plan --layout per-gpu [--gpus-per-rank G] [--ranks N] [--threads T]
[--reserve none|first-core-per-l3|first-core-per-numa] [--order gpu|cpu]`:

1. `--reserve` takes cores out first: the first usable core of every L3 domain (what LUMI's
   and Frontier's low-noise mode keep for the system) or of every NUMA node. On a node whose
   cgroup already hides those cores, leave it at `none`.
2. A GPU's *domain* is the usable cores local to it. GPUs are grouped G at a time inside one
   domain; when a domain holds fewer than G GPUs (or not a multiple of G), the domains of a
   NUMA node, then of a package are merged (two GCDs of one MI250X: `--gpus-per-rank 2`). G
   GPUs that do not fit in one package are refused.
3. One rank per GPU group by default. `--ranks` smaller takes evenly spaced groups; larger
   must be a multiple of the groups (ranks then share their GPUs).
4. The ranks of one domain split its cores evenly, in core order, by GPU index; each rank
   takes the first T cores (`--smt`: PUs) of its share, T = the smallest share by default.
5. `--order gpu` (default) numbers ranks by GPU index, so rank *i* gets GPU *i*; `--order cpu`
   numbers them by their first core.
6. Each rank's NIC: the one sharing its cores' or its GPUs' locality, else in its NUMA node,
   else its package, else any; among equally near NICs the least used.
7. GPUs without any usable core near them (a cgroup holding a few PUs) are left out, with a
   note. Impossible requests get a one-line error and exit status 2.

LUMI's recommended binding (8 ranks, 7 threads, rank *i* on GCD *i*):

{run("plan", "-t", TIOGA, "--layout", "per-gpu", *LUMI, "--order", "gpu")}
The masks are LUMI's `--cpu-bind=mask_cpu:fe000000000000,fe00000000000000,fe0000,fe000000,fe,
fe00,fe00000000,fe0000000000` and every rank's NIC is the one in its NUMA node:

{draw(["-t", TIOGA, "--layout", "per-gpu", *LUMI, "--order", "gpu"], "gpu-tioga-lumi.png", img)}
Frontier's `--gpu-bind=closest` order (ranks in core order: rank 0 on PUs 1-7 with GCD 4):

{run("plan", "-t", TIOGA, "--layout", "per-gpu", *LUMI, "--order", "cpu", "-f", "srun")}
{draw(["-t", TIOGA, "--layout", "per-gpu", *LUMI, "--order", "cpu"], "gpu-tioga-frontier.png", img)}
A POWER9 node (Lassen): 4 V100, two per socket, local to the whole socket, so the two ranks of
a socket split its cores; each rank gets one of the socket's two InfiniBand NICs:

{run("plan", "-t", LASSEN, "--layout", "per-gpu", head=13)}
{draw(["-t", LASSEN, "--layout", "per-gpu"], "gpu-lassen.png", img)}
Impossible requests:

{run("plan", "-t", TIOGA, "--layout", "per-gpu", "--gpus-per-rank", "3", ok=False)}
{run("plan", "-t", TIOGA, "--layout", "per-gpu", "--ranks", "16", "--threads", "5", ok=False)}
## In the plan

Each rank of a per-gpu plan carries `gpus` (`os`, `index`, `pci`, `vendor`), `nic` (`os`,
`pci`, `kind`) and `env`, the variables that rank alone must see (docs/plan-format.md). For
the launch step, `topobind.plan.model.rank_envs(plan)` returns `{{rank: {{variable: value}}}}`.

{run("plan", "-t", TIOGA, "--layout", "per-gpu", *LUMI, "-f", "json", start='"ranks"', head=33)}
## Emitted for launchers

- Slurm: `--cpu-bind=mask_cpu:` one mask per task and `--gpu-bind=none` (the per-rank
  variables choose the GPUs; Slurm's own binding would renumber the devices each rank sees).
- OpenMPI 4 and 5: the rankfile (or `--map-by`), as for every layout.
- The per-rank variables: `topobind run` sets them per rank; for a hand-written `srun` or
  `mpirun` line, `-f rank-env` writes a small `sh` wrapper that exports the local rank's
  variables and execs the program (`srun ... ./select.sh ./app`):

{run("plan", "-t", TIOGA, "--layout", "per-gpu", *LUMI, "-f", "rank-env")}
- For site admins, `-f gres` writes `gres.conf` lines whose `Cores=` (Slurm's logical core
  numbers, hwloc's `Core L#`) make Slurm's own `--gpu-bind=closest` pick the same GPUs:

{run("plan", "-t", TIOGA, "--layout", "per-gpu", "-f", "gres")}
## Verify

`topobind verify` runs the probe (`kernels/bin/whereami`, which reports each rank's
`ROCR_VISIBLE_DEVICES`, `CUDA_VISIBLE_DEVICES`, `ZE_AFFINITY_MASK` and `UCX_NET_DEVICES`)
under the launch command and checks, per rank, the CPUs and the variables. The probe does not
open a GPU runtime: it checks the variables, not the device the runtime then shows, and says
so. On this 2-core machine without GPU, with the live topology plus one fake GPU per core and
one InfiniBand NIC (tests/launch/test_gpu_launch.py) and OpenMPI 5 (recorded output):

```console
$ topobind plan -t node.xml -l per-gpu -r 2 -f json > plan.json
$ topobind plan -t node.xml -l per-gpu -r 2 -f rank-env > select.sh
$ topobind verify --plan plan.json -- mpirun -np 2 --map-by ppr:1:core --bind-to core sh select.sh
{VERIFY_OUTPUT}
```

## Several kinds of cores

On nodes with P-cores and E-cores hwloc reports CPU kinds, ranked by efficiency (the highest
is the most performant). Every layout takes `--cpukind performance|efficiency|all`; the
default plans on the most performant kind only and says so when others exist. Masks and
rankfiles keep the node's own numbering.

{run("show", "-t", KINDS, tail=3)}
{run("plan", "-t", KINDS, "--layout", "compact", "--smt", "-f", "srun")}
{run("plan", "-t", KINDS, "--layout", "compact", "--smt", "--cpukind", "all", "-f", "srun")}
## Cost

`make bench-gpu-plan` times the plan on the Tioga and Lassen nodes (results/bench/gpu-plan.json).
"""


def main() -> int:
    check = "--check" in sys.argv[1:]
    doc_path = REPO / "docs" / "gpu.md"
    with tempfile.TemporaryDirectory() as tmp:
        outdir = Path(tmp) if check else REPO / "docs" / "img"
        text = user_paths(document(outdir))
        names = sorted(p.name for p in outdir.glob("gpu-*.png"))
        if check:
            stale = [] if doc_path.read_text() == text else ["docs/gpu.md"]
            for name in names:
                if (REPO / "docs" / "img" / name).read_bytes() != (outdir / name).read_bytes():
                    stale.append(f"docs/img/{name}")
            if stale:
                print("stale: " + ", ".join(stale) + "; run scripts/gen-gpu-doc.py")
                return 1
            return 0
        doc_path.write_text(text)
    print(f"wrote {doc_path.relative_to(REPO)} and docs/img/gpu-*.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
