#!/usr/bin/env python3
"""Regenerate docs/gpu.md and its pictures docs/img/gpu-*.png: the prose below plus the real
output of every command shown (run on the hwloc XMLs of topologies/).

    scripts/gen-gpu-doc.py            # write docs/gpu.md and the PNGs
    scripts/gen-gpu-doc.py --check    # exit 1 when either is stale (tests/cli/test_gpu_docs.py)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from docpaths import user_paths  # scripts/: this machine's paths -> a user's

REPO = Path(__file__).resolve().parents[1]
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
SHARED = REPO / "topologies"
SHOWN = "topologies"  # how the doc names the repository's topologies (commands run from it)
TIOGA = f"{SHOWN}/gpu/mpibind-eas-tioga.xml"
LASSEN = f"{SHOWN}/gpu/mpibind-coral-lassen.xml"
KINDS = f"{SHOWN}/fakecpukinds.xml"
H100_PCI = f"{SHOWN}/gpu/h100-cloud-pci-only.xml"
H100_CL = f"{SHOWN}/gpu/h100-cloud-opencl.xml"
#: recorded on this project's 2-core machine without GPU (OpenMPI 5, the tests' stand-in
#: libcuda.so.1, two NVIDIA GPUs in two PCI domains, the second faster): see the Verify section
_VARS = [
    "rank  host       variable                 planned        seen           status",
    "   0  vm         CUDA_DEVICE_ORDER        PCI_BUS_ID     PCI_BUS_ID     OK",
    "   0  vm         CUDA_VISIBLE_DEVICES     0              0              OK",
    "   1  vm         CUDA_DEVICE_ORDER        PCI_BUS_ID     PCI_BUS_ID     OK",
    "   1  vm         CUDA_VISIBLE_DEVICES     1              1              OK",
    "rank  host       GPUs planned   runtime saw    status",
]
VERIFY_OK = "\n".join(
    [
        "topobind: verify: all 2 threads on their planned CPUs, bound to them",
        *_VARS,
        "   0  vm         0000:41:00.0   0000:41:00.0   OK  "
        "GPU-11111111-2222-3333-4444-555555555555",
        "   1  vm         0001:00:06.0   0001:00:06.0   OK  "
        "GPU-99999999-8888-7777-6666-555555555555",
        "4 of 4 device variables as planned",
        "GPU runtime: 2 of 2 ranks saw their planned GPUs",
    ]
)
H200_VERIFY = "\n".join(
    [
        "$ topobind run --layout per-gpu --launcher mpirun --mpi openmpi5 --verify -- "
        'python3 -c "$check"',
        "topobind: note: OS device opencl1d0 is outside its PCI device: taken as GPU 0000:00:06.0",
        "topobind: note: GPU 0000:00:06.0: sysfs says numa_node -1 (the firmware does "
        "not tell), so its NUMA node is unknown; its CPUs are its local_cpulist (16 "
        "usable)",
        "topobind: note: each rank needs its own CUDA_DEVICE_ORDER/CUDA_VISIBLE_DEVICES "
        "(ranks[].env of the plan): 'topobind run' sets them per rank; for a "
        "hand-written launch, 'topobind plan -f rank-env' writes a wrapper that does",
        "topobind: verify: all 16 threads on their planned CPUs, bound to them",
        "rank  host       variable                 planned        seen           status",
        "   0  vm         CUDA_DEVICE_ORDER        PCI_BUS_ID     PCI_BUS_ID     OK",
        "   0  vm         CUDA_VISIBLE_DEVICES     0              0              OK",
        "rank  host       GPUs planned   runtime saw    status",
        "   0  vm         0000:00:06.0   0000:00:06.0   OK  "
        "GPU-1c92f46c-f917-aa2d-3259-ec0af58fda3b",
        "2 of 2 device variables as planned",
        "GPU runtime: 1 of 1 ranks saw their planned GPUs",
        "torch sees 1 device(s); device 0 at 0 0 6 NVIDIA H200",
    ]
)
VERIFY_NO_GPU = "\n".join(
    [
        *_VARS,
        "   0  vm         0000:41:00.0   0000:41:00.0   OK  "
        "GPU-11111111-2222-3333-4444-555555555555",
        "   1  vm         0001:00:06.0   (none)         MISMATCH  cuda sees no GPU "
        "(CUDA_ERROR_NO_DEVICE): CUDA_VISIBLE_DEVICES names none it may use",
        "4 of 4 device variables as planned",
        "GPU runtime: 1 of 2 ranks saw their planned GPUs; 1 MISMATCH",
        "topobind: error: device variables or the GPUs a runtime saw differ from the "
        "plan; verification failed, so the program is not launched",
    ]
)
VERIFY_MISMATCH = "\n".join(
    [
        *_VARS,
        "   0  vm         0000:41:00.0   0001:00:06.0   MISMATCH  cuda device 0 is 0001:00:06.0, "
        "planned 0000:41:00.0",
        "   1  vm         0001:00:06.0   0000:41:00.0   MISMATCH  cuda device 0 is 0000:41:00.0, "
        "planned 0001:00:06.0",
        "4 of 4 device variables as planned",
        "GPU runtime: 0 of 2 ranks saw their planned GPUs; 2 MISMATCH",
        "topobind: error: device variables or the GPUs a runtime saw differ from the plan; "
        "verification failed, so the program is not launched",
        "$ echo $?",
        "1",
    ]
)
VERIFY_NO_DRIVER = "\n".join(
    [
        "rank  host       GPUs planned   runtime saw    status",
        "   0  vm         0000:41:00.0   (none)         UNVERIFIABLE  no GPU runtime library "
        "(libcuda.so.1, libamdhip64) on this node: no driver",
        "   1  vm         0001:00:06.0   (none)         UNVERIFIABLE  no GPU runtime library "
        "(libcuda.so.1, libamdhip64) on this node: no driver",
        "4 of 4 device variables as planned",
        "GPU runtime: 0 of 2 ranks saw their planned GPUs; 2 UNVERIFIABLE (this node has no GPU)",
    ]
)
VERIFY_HUNG = "\n".join(
    [
        *_VARS,
        "   0  vm         0000:41:00.0   (none)         MISMATCH  cuda: "
        "cuDeviceGetPCIBusId(device 0) did not answer within 1 s",
        "   1  vm         0001:00:06.0   (none)         MISMATCH  cuda: "
        "cuDeviceGetPCIBusId(device 0) did not answer within 1 s",
        "4 of 4 device variables as planned",
        "GPU runtime: 0 of 2 ranks saw their planned GPUs; 2 MISMATCH",
        "topobind: error: device variables or the GPUs a runtime saw differ from the "
        "plan; verification failed, so the program is not launched",
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
`topobind` finds the node's GPUs (with or without hwloc's GPU plugins) and NICs, plans ranks,
threads, GPUs and NICs together (`--layout per-gpu`), emits them for Slurm and OpenMPI, and
`topobind verify` checks each rank's CPUs, device variables and the GPUs its runtime sees.
This page uses the HPE Cray EX235A node of `topologies/gpu/mpibind-eas-tioga.xml`
(the LUMI-G / Frontier node: one 64-core EPYC in 8 L3 domains and 4 NUMA nodes, 8 MI250X
GCDs `rsmi0..7`, 4 Slingshot NICs `hsi0..3`). Every output below is real
(`scripts/gen-gpu-doc.py` regenerates this page).

## Where the GPUs come from

A GPU is a **PCI device**: class 0302 (3D controller) or 0380 (other display) from NVIDIA
(10de), AMD (1002) or Intel (8086), or class 0300 (VGA) when a GPU driver is bound to it. hwloc
lists these PCI devices with or without its GPU plugins, so topobind finds every GPU even
where hwloc was built without them (Debian's and Ubuntu's `libhwloc-plugins` have none for
CUDA, NVML or ROCm SMI; Spack's hwloc turns them off by default; Rocky 9's lacks them). A
BMC's display adapter (ASPEED, Matrox) is never a GPU. GPUs are keyed and ordered by their
full bus id, domain included (`0000:c1:00.0`, `0001:00:06.0`).

What else is read, when present:

- hwloc's PCI devices (always, live or XML): every GPU and its locality (the nearest non-I/O
  object's cpuset, cut to this job's PUs).
- hwloc's GPU OS devices `nvmlN`, `rsmiN`, `zeN` (hwloc built with its NVML, ROCm SMI, Level
  Zero plugins): names, model, UUID, the runtime index.
- hwloc's `cudaN`, `openclPdN`, DRM `cardN`/`renderDN`: names and a model only; their numbers
  shift with `*_VISIBLE_DEVICES` and CUDA's own order, so they never decide an index.
- On a live node, sysfs `/sys/bus/pci/devices/*/`: `class`, `vendor`, the bound `driver`,
  `local_cpulist`, `numa_node` (-1, a number no NUMA node of the machine has, or no file:
  unknown, noted as read). A GPU bound to a driver other than its vendor's compute driver
  (CUDA sees `nvidia` devices only, HIP `amdgpu`, Level Zero `i915`/`xe`) is no runtime's
  device: one bound to `vfio-pci` (passed to a VM), to no driver, or to the display drivers
  `nouveau`/`radeon` takes no index and is left out with one note (unless procfs, NVML or
  ROCm SMI list it). A `local_cpulist` that is no CPU list leaves that GPU's CPUs unknown (no
  rank is planned on it), with a note naming the file. Every read is of a regular file,
  non-blocking and bounded in size: a FIFO or `/dev/zero` in the tree is skipped.
- On a live node with the NVIDIA driver, `/proc/driver/nvidia/gpus/*/information`: model and
  `GPU UUID`, no library needed (as Slurm's `AutoDetect=nvidia`).
- On a live node with GPUs of that vendor, NVML (`libnvidia-ml.so.1`) and ROCm SMI
  (`librocm_smi64.so`), loaded at run time with ctypes (no build dependency;
  `TOPOBIND_GPU_LIBS=0` keeps them unloaded): UUIDs, MIG slices' UUIDs, ROCm's index. They are
  asked in a forked child given `TOPOBIND_GPU_LIBS_TIMEOUT` seconds (default 10): a library
  that hangs, crashes or answers garbage is left out with a note (`NVML did not answer within
  10 s: left out ...`), the command goes on. Models, UUIDs and drivers' words are escaped
  before they are printed, and long lists of GPUs name 8 and say `and N more`.

Each GPU says where it was found (`found by ...` in `topobind show`, `sources` in
`show -f json`). Odd devices are notes, never errors: hwloc 2.10's OpenCL backend puts a
device whose bus id it cannot read beside its PCI device (`opencl1d0` on the H100 node below);
it is taken as the one GPU of its vendor under the same bridge, or left out with a note when
that is ambiguous. A CPU OpenCL device (pocl, Intel's CPU runtime) is no GPU. An OS device of
another vendor's runtime than its PCI device's (`cuda0` under an Intel device), a malformed bus
id, an OS device numbered with more than 4 digits: left out, with a note. Only GPUs that
cannot be told apart (two PCI devices with one bus id, one OS device name or one runtime index
twice) stop a plan, and only a `per-gpu` plan: every other command and layout goes on with a
note.

The *index* a plan exports is the GPU's position among its vendor's GPUs in bus order, which
is NVML's numbering and CUDA's under `CUDA_DEVICE_ORDER=PCI_BUS_ID` (exported with it, see
below); for AMD and Intel it is `rsmiN`'s or `zeN`'s number when hwloc had that plugin, else
the bus position, with a note to check it (`rocm-smi`, `xpu-smi`).

A cloud VM with one H100 whose hwloc had no GPU plugin, and the same node with the distro's
OpenCL plugin (both exported on the node, `topologies/gpu/`):

{run("show", "-t", H100_PCI, start="GPU ")}
{run("show", "-t", H100_CL, start="GPU ")}
{run("plan", "-t", H100_CL, "--layout", "per-gpu", start="rank  GPUs")}
On a live node topobind also reads sysfs and procfs (their roots can be moved with
`TOPOBIND_SYSFS_ROOT` and `TOPOBIND_PROCFS_ROOT`, which the tests use for fake trees), so
`show` there lists GPUs `found by hwloc PCI, sysfs, procfs, NVML` with their UUIDs.

**For the richest inventory** install hwloc's GPU plugins where you plan: Debian/Ubuntu
`libhwloc-contrib-plugins` (NVML, ROCm SMI, Level Zero where packaged), or hwloc built
`--enable-nvml --enable-rsmi --enable-levelzero` (Spack: `hwloc+nvml+rocm+levelzero`), and
export the node's XML with them (`lstopo-no-graphics --of xml > node.xml`). Without them, run
topobind on the node itself: sysfs, procfs and NVML give the same GPUs and UUIDs.

## Devices in the topology

NICs are hwloc *OS devices*: `mlx5_*`, `mlx4_*`, `hfi1_*` (OpenFabrics:
`UCX_NET_DEVICES=<hca>:1`), `cxi*`, `hsn*`, `hsi*` (Slingshot), `bxi*`; an IP interface on the
same PCI device (`ib0`, `hsi0` of an `mlx5_0`) is the same NIC. Devices are recognised by name,
subtype and PCI class, never by the numeric `osdev_type` (it differs between hwloc versions).
Locality: the cpuset of the nearest non-I/O ancestor (an L3 domain on the EX235A, a package on
POWER9), cut to the PUs this job may use; NUMA nodes from its nodeset.

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

**Device identity, not a bare ordinal.** CUDA numbers devices fastest first by default;
NVML, `nvidia-smi` and topobind number them by PCI bus. On a node whose GPUs differ, index 0
is then another GPU for CUDA than for the plan (dask-cuda#777). So every rank given
`CUDA_VISIBLE_DEVICES` by index also gets `CUDA_DEVICE_ORDER=PCI_BUS_ID`; a GPU with MIG
slices gets `CUDA_VISIBLE_DEVICES=MIG-<uuid>` (a slice shares its parent's bus id, and CUDA
shows one slice per process). AMD: `ROCR_VISIBLE_DEVICES` alone, never also
`HIP_VISIBLE_DEVICES` (HIP would renumber what ROCr left visible; a preset one is noted).
Intel: `ZE_AFFINITY_MASK` with `ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE` stated (the mask then
numbers whole GPUs, as `zeN` does), unless you set the hierarchy yourself, which is kept and
noted. The plan JSON (`ranks[].env`), the rank-env wrapper, `topobind run` (the per-rank step)
and the srun and mpirun lines that run the wrapper all carry the same variables.

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

`topobind verify` and `topobind run --verify` run the probe (`kernels/bin/whereami`) under the
launch command and check, per rank, the CPUs, the device variables, and **the GPUs the rank's
own GPU runtime sees**: the probe loads the CUDA driver (`libcuda.so.1`: `cuInit`,
`cuDeviceGetCount`, `cuDeviceGet`, `cuDeviceGetPCIBusId`, `cuDeviceGetUuid_v2`) and HIP
(`libamdhip64`: `hipGetDeviceCount`, `hipDeviceGet`, `hipDeviceGetPCIBusId`) with `dlopen` at
run time (no build-time dependency), each in a child process given
`TOPOBIND_GPU_PROBE_TIMEOUT` seconds (default 60), and reports each device's bus id and UUID
in the runtime's order (at most 64 devices). Each rank is judged by its own vendor's runtime:
HIP for a rank the plan gives `ROCR_VISIBLE_DEVICES`, CUDA for `CUDA_VISIBLE_DEVICES` (a rank
given both: by both, which together must list its GPUs), so a node with GPUs of both vendors
verifies. A rank is OK when its runtime shows exactly its
planned GPUs, device 0 first. MISMATCH (exit status 1) names both bus ids, or what the runtime
did instead: any error code, with the driver's name for it (`cuInit failed:
CUDA_ERROR_DEVICES_UNAVAILABLE (46)`, HIP's `hipErrorNoDevice (100)`), a call that did not
answer in time or crashed (named), a device it could not read (`cuda device 0 unreadable
(...)`: never skipped), a count of more than 64, a library the loader refused (the loader's
words). UNVERIFIABLE only when no runtime library of the rank's vendor is there (no driver on
the node, CUDA's stub library, an Intel GPU: the probe asks no Level Zero, or the MPI build of
the probe), never OK. A rank whose CPUs and
GPU sit on different NUMA nodes gets a note. NVML is not asked: it ignores
`CUDA_VISIBLE_DEVICES`.

On a lent node with one NVIDIA H200 (16 cores, driver 580, the image's PyTorch; run by
`scripts/gpu-node-check.sh`, see [the GPU node](contributing/gpu-node.md)), the rank's own
CUDA runtime agrees with the plan, and so does the program's (PyTorch, started by OpenMPI 5 under
the plan; the memory lines before the tables are left out):

```console
{H200_VERIFY}
```

(`check` held `import torch; p = torch.cuda.get_device_properties(0); print("torch sees",
torch.cuda.device_count(), "device(s); device 0 at", p.pci_domain_id, p.pci_bus_id,
p.pci_device_id, p.name)`.) The same node's image had only OpenMPI 4.1.6 as `/usr/bin/mpirun`;
asked for `--mpi openmpi5` with that one alone, topobind launches it with OpenMPI 4's flags and
says so in a note.

What the CUDA driver makes of the variables was measured there too, 120 combinations
(`tests/launch/data/cuda-visible-h200.tsv`): `CUDA_VISIBLE_DEVICES` is read left to right, an
index or a UUID prefix (`GPU-1c92`) per entry, blanks around an index ignored, and the list stops
at the first entry that names no GPU (`1` on a one-GPU node, `-1`, `x`, an empty entry); but an
index listed twice (`0,0`, `0, 0`) and any `CUDA_DEVICE_ORDER` other than exactly
`FASTEST_FIRST` or `PCI_BUS_ID` (an empty one, `pci_bus_id`) make `cuInit` fail with
`CUDA_ERROR_INVALID_DEVICE` (101): the program then sees no GPU at all. Verification reports
both cases, no GPU visible and variables refused, as MISMATCH (the launch is stopped), as it
does any other failure of the driver; only a node without a driver is UNVERIFIABLE.

Several GPUs need a stand-in: the output below is real, recorded on this project's
2-core machine without GPU, with the live topology plus two NVIDIA GPUs (`0000:41:00.0` and
`0001:00:06.0`, the second faster) and the tests' stand-in `libcuda.so.1`
(`tests/launch/fake_libcuda.c`, which follows CUDA's numbering rules), OpenMPI 5
(`tests/launch/test_gpu_launch.py`; the memory lines before the tables are left out):

```console
$ topobind run -t node.xml -l per-gpu --launcher mpirun --mpi openmpi5 --verify -- ./app
{VERIFY_OK}
```

The same launch with a CUDA runtime that numbers fastest first (the order variable lost on the
way): the variables are as planned, the GPUs are not, and the program is not launched:

```console
$ topobind run -t node.xml -l per-gpu --launcher mpirun --mpi openmpi5 --verify -- ./app
{VERIFY_MISMATCH}
```

A rank whose runtime sees no GPU at all (here the job may use only the first of the two:
the stand-in shows one, so rank 1's `CUDA_VISIBLE_DEVICES=1` names none) is a MISMATCH too:

```console
$ topobind run -t node.xml -l per-gpu --launcher mpirun --mpi openmpi5 --verify -- ./app
{VERIFY_NO_GPU}
```

A driver whose `cuDeviceGetPCIBusId` never returns (the stand-in told to hang,
`TOPOBIND_GPU_PROBE_TIMEOUT=1`) stops the launch too, naming the call:

```console
$ topobind run -t node.xml -l per-gpu --launcher mpirun --mpi openmpi5 --verify -- ./app
{VERIFY_HUNG}
```

And where no GPU driver is installed:

```console
{VERIFY_NO_DRIVER}
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
