#!/usr/bin/env python3
"""Regenerate docs/layouts.md and its pictures docs/img/layout-<name>.png: the prose below
plus the real output of every command shown.

    scripts/gen-layouts-doc.py            # write docs/layouts.md and the PNGs
    scripts/gen-layouts-doc.py --check    # exit 1 when either is stale (tests/cli/test_docs.py)

--check draws the PNGs into a temporary directory and compares them byte for byte with the
committed ones, so the doc always shows what topobind really prints and draws.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from docpaths import user_paths  # scripts/: this machine's paths -> a user's

REPO = Path(__file__).resolve().parents[1]
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
BETZY = "synthetic:pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)"
IMG = "docs/img"
NODE = "2x AMD EPYC 7742, NPS4: 2 packages, 8 NUMA nodes, 32 L3 domains, 128 cores, 256 PUs"


def shell_arg(a: str) -> str:
    return f"'{a}'" if any(c in a for c in " ()*") else a


def run(*args: str, head: int | None = None) -> str:
    out = subprocess.run(
        [TOPOBIND, *args], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    lines = out.rstrip("\n").splitlines()
    if head is not None and len(lines) > head:
        lines = lines[:head] + ["..."]
    cmd = "topobind " + " ".join(shell_arg(a) for a in args)
    return "```console\n$ " + cmd + "\n" + "\n".join(lines) + "\n```\n"


def picture_name(title: str) -> str:
    """``l3-groups:N`` -> ``layout-l3-groups.png``."""
    return f"layout-{title.split(':')[0]}.png"


def draw(args: list[str], name: str, outdir: Path) -> str:
    """Draw the PNG into ``outdir`` with ``topobind draw``; the console block shows the command
    as it is run for the doc (-o docs/img/NAME)."""
    out = subprocess.run(
        [TOPOBIND, "draw", *args, "-o", str(outdir / name)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    shown = f"{IMG}/{name}"
    out = out.replace(str(outdir / name), shown)
    cmd = "topobind draw " + " ".join(shell_arg(a) for a in [*args, "-o", shown])
    return "```console\n$ " + cmd + "\n" + out.rstrip("\n") + "\n```\n"


SECTIONS: list[tuple[str, str, list[str]]] = [
    (
        "compact",
        """Threads fill slots in hwloc logical order: rank 0 takes the first T slots, rank
1 the next T, and so on. Defaults: 1 rank, T = every slot. Good for ranks that share data
with their neighbours; the worst choice for memory bandwidth when the node is not full.""",
        ["-l", "compact", "-r", "8", "-T", "4"],
    ),
    (
        "spread",
        """The slots are cut into R equal consecutive regions, one per rank; each rank
takes T slots evenly spaced inside its region (the first slot of the region always). With
R = 1 this is OpenMP's `spread` over the whole node.""",
        ["-l", "spread", "-r", "4", "-T", "4"],
    ),
    (
        "every-other-core",
        """Half the cores: inside each L3 domain (inside each NUMA node and
package where there is no shared cache) the cores at even positions are eligible, so every
L3 domain and every NUMA node keeps the same share. The ranks are then spread over the
eligible cores as in `spread`. Defaults: one single-thread rank per eligible core. On
betzy-epyc7742, 64 ranks land on OS PUs 0,2,4,...,126, eight per NUMA node: spread over
both packages, not packed onto PUs 0-63 (the first package). On EPYC this gives each core
more memory bandwidth: the Betzy documentation measured a higher STREAM triad with 64
threads on every other core than with all 128.""",
        ["-l", "every-other-core"],
    ),
    (
        "per-l3",
        """One rank per L3 domain (shared-cache domain; where a machine has no L3, the
highest cache level shared by several cores; refused where no cache is shared), threads =
the domain's cores. Fewer ranks than domains: an evenly spaced subset of domains. A
multiple of the domain count: each domain is split into equal consecutive parts.""",
        ["-l", "per-l3", "-r", "16"],
    ),
    (
        "l3-groups:N",
        """Neighbouring L3 domains of the same NUMA node are bundled until a group
holds N slots (threads); a group never crosses a NUMA node. One rank per group, N threads.
This is the policy Stockfish chose on EPYC 9755: share a table among about 32 threads but
never across NUMA nodes. On betzy-epyc7742 an L3 domain has 4 cores, so `l3-groups:8`
bundles two neighbouring L3 domains per rank: 16 ranks of 8 threads, two per NUMA node.""",
        ["-l", "l3-groups:8"],
    ),
    (
        "per-numa",
        """One rank per NUMA node that has cores (NUMA nodes sharing the same cores,
such as DDR and MCDRAM on KNL, form one domain), threads = the node's cores.""",
        ["-l", "per-numa"],
    ),
    (
        "per-socket",
        """One rank per package, threads = the package's cores.""",
        ["-l", "per-socket"],
    ),
]

HEAD = (
    """# Layouts

A layout decides, for R ranks of T OpenMP threads each, which PU every thread runs on. All
PU lists are **OS indexes** (what Linux, Slurm masks and `OMP_PLACES` use); cores and L3
domains in pictures and JSON are in **hwloc logical order** (`L#`).

**Slots.** A thread gets one *slot*: by default a core (the thread's place is the core's
first usable PU, so SMT siblings stay idle); with `--smt` a single PU (a 2-way SMT core
holds two threads). Offline PUs and PUs outside the job's cpuset or affinity mask are never
used (`topobind show` lists them).

**Counts.** `--ranks R` and `--threads T` may be given or left out; each layout has a
default (below). A request that does not fit (R x T larger than the usable slots, more
ranks than domains that is not a multiple of them, more threads than a domain holds) is
refused with one line that says what to change, exit status 2.

**Launch flags.** Every plan comes with `OMP_*`, OpenMPI 5 and 4 `mpirun` and Slurm `srun`
flags (`--format env|openmpi|openmpi4|srun|json`). `--map-by ppr:N:RESOURCE:pe=M` is used
only where OpenMPI's mapper reproduces the plan exactly (checked against OpenMPI's own
mapper in the tests); otherwise a rankfile. Single-process plans export exact
`OMP_PLACES`; multi-rank plans export `OMP_PLACES=cores` (`threads` with `--smt`), which
each rank's binding narrows to its own PUs (`topobind run` exports exact per-rank places).

The pictures below are of **betzy-epyc7742** (2x AMD EPYC 7742 in NPS4 mode: 2 packages,
8 NUMA nodes, 32 L3 domains of 4 cores, SMT siblings at +128), the synthetic node
`"""
    + BETZY
    + """`. Each layout is shown twice: as text from `topobind plan --format
picture` (one cell per core, holding the rank that uses it; `.`: unused; each line ends
with the OS indexes of its PUs), and as a PNG from `topobind draw` (packages, NUMA nodes, L3
domains and cores as nested boxes; every core shows `L#<logical index>` and `PU <OS
indexes>` of its PUs, SMT siblings included, so you can read off what Slurm masks,
`OMP_PLACES` and `/proc` will say; each rank in its own colour, `r<rank>:<OpenMP thread
numbers>` on the cores its threads run on, white cores idle; after 20 ranks the colours come
round again with a hatching; the legend lists every rank's cores and PUs).

```console
$ topobind show -t '"""
    + BETZY
    + """' | head -8
"""
)


def main() -> int:
    check = "--check" in sys.argv
    show = subprocess.run(
        [TOPOBIND, "show", "-t", BETZY], capture_output=True, text=True, check=True
    ).stdout.splitlines()[:8]
    parts = [HEAD + "\n".join(show) + "\n```\n"]
    outdir = Path(tempfile.mkdtemp(prefix="layouts-doc-"))
    try:
        counts = [plan_counts(["-t", BETZY, *sec[2]]) for sec in SECTIONS]

        def draw_section(i: int) -> str:
            args = SECTIONS[i][2]
            layout = args[args.index("-l") + 1]
            title = f"layout {layout}: {counts[i][0]} x {counts[i][1]} on betzy-epyc7742 ({NODE})"
            return draw(
                ["-t", BETZY, *args, "--title", title], picture_name(SECTIONS[i][0]), outdir
            )

        with ThreadPoolExecutor(max_workers=4) as pool:  # each draw is its own process
            drawn = list(pool.map(draw_section, range(len(SECTIONS))))
        for (title, prose, args), drawing, (nranks, per) in zip(
            SECTIONS, drawn, counts, strict=True
        ):
            args = ["-t", BETZY, *args]
            name = picture_name(title)
            alt = f"{title} on betzy-epyc7742: {nranks} x {per}"
            parts.append(
                f"\n## {title}\n\n{prose}\n\n"
                + run("plan", *args, "-f", "picture")
                + "\n"
                + drawing
                + f"\n![{alt}](img/{name})\n"
            )
        stale = pictures_stale(outdir) if check else []
        if not check:
            for png in sorted(outdir.glob("*.png")):
                shutil.copyfile(png, REPO / IMG / png.name)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    parts.append(
        """
## per-gpu

One rank per GPU (`--gpus-per-rank G` GPUs each), its threads on the cores local to its
GPU(s), with the NIC nearest to it; `--reserve first-core-per-l3|first-core-per-numa` leaves
cores out, `--order gpu|cpu` numbers the ranks by GPU or by core. It plans only on a node
whose topology lists GPUs (betzy-epyc7742 has none): see [gpu.md](gpu.md), with the LUMI-G /
Frontier node, its pictures and real output.
"""
    )
    parts.append(
        """
## From a plan to flags

```console
$ topobind plan -t '"""
        + BETZY
        + """' -l per-l3 -f openmpi
"""
        + subprocess.run(
            [TOPOBIND, "plan", "-t", BETZY, "-l", "per-l3", "-f", "openmpi"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        + "```\n\n"
    )
    parts.append(
        run("plan", "-t", BETZY, "-l", "every-other-core", "-r", "1", "-T", "64", "-f", "env")
    )
    text = user_paths("".join(parts))
    target = REPO / "docs" / "layouts.md"
    if check:
        if target.read_text() != text:
            print(f"{target.relative_to(REPO)} is stale", file=sys.stderr)
            return 1
        for name in stale:
            print(f"{IMG}/{name} is stale or missing", file=sys.stderr)
        return 1 if stale else 0
    target.write_text(text)
    print(f"wrote {target.relative_to(REPO)} and {len(SECTIONS)} pictures in {IMG}/")
    return 0


def plan_counts(args: list[str]) -> tuple[str, str]:
    """("16 ranks", "4 threads") of the plan the args make (for the pictures' alt text)."""
    import json

    doc = json.loads(
        subprocess.run(
            [TOPOBIND, "plan", *args, "-f", "json"], capture_output=True, text=True, check=True
        ).stdout
    )

    def n(k: int, word: str) -> str:
        return f"{k} {word}{'' if k == 1 else 's'}"

    return n(doc["nranks"], "rank"), n(doc["threads"], "thread")


def pictures_stale(outdir: Path) -> list[str]:
    """Names of the committed pictures that differ from the ones just drawn."""
    stale = []
    for png in sorted(outdir.glob("*.png")):
        committed = REPO / IMG / png.name
        if not committed.is_file() or committed.read_bytes() != png.read_bytes():
            stale.append(png.name)
    return stale


if __name__ == "__main__":
    sys.exit(main())
