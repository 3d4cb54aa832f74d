"""HPL (High-Performance Linpack): input generation, output parsing, a driver.

The HPL used is Debian's ``hpcc`` (HPC Challenge 1.5.0, which contains HPLinpack 2.0), unless
an ``xhpl`` is on PATH. hpcc has no switch to run HPL alone: it reads ``hpccinf.txt`` (an
HPL.dat plus four PTRANS lines) from its working directory, runs every HPC Challenge test
(HPL last) and writes ``hpccoutf.txt``; we read only its ``Begin of HPL section`` ..
``End of HPL section`` part (the same text xhpl prints) and the ``HPL_Tflops`` summary line.
hpcc is linked against OpenMPI 4 (``libmpi.so.40``), so it runs under ``/usr/bin/mpirun``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topobind.errors import TopobindError
from topobind.launch import run as jobrun
from topobind.launch.build import build, job_shape
from topobind.launch.shape import RunOptions
from topobind.measure.programs import HUGEPAGE_SHIM, find_kernel
from topobind.measure.results import (
    RESULT_SCHEMA_ID,
    Headline,
    Metric,
    Pages,
    Placement,
    Result,
    result_document,
    tier_from_environment,
)
from topobind.plan.model import Plan
from topobind.runner import run_process

DEFAULT_NB = 192
MPIRUN4 = "/usr/bin/mpirun"
#: allocations from this size on go to hugepages (HPL allocates one panel matrix per rank)
HUGE_MIN = "16M"


@dataclass(frozen=True)
class HplConfig:
    n: int
    nb: int
    p: int
    q: int


def grid(ranks: int) -> tuple[int, int]:
    """Most square P x Q with P <= Q and P * Q = ranks."""
    if ranks < 1:
        raise TopobindError(f"HPL needs at least 1 rank, got {ranks}")
    p = max(d for d in range(1, math.isqrt(ranks) + 1) if ranks % d == 0)
    return p, ranks // p


def total_memory_bytes(meminfo: str = "/proc/meminfo") -> int:
    with open(meminfo) as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise TopobindError(f"{meminfo}: no MemTotal line")


def problem_size(mem_bytes: int, fraction: float, nb: int) -> int:
    """Largest N, a multiple of NB, whose N x N doubles fit in ``fraction`` of ``mem_bytes``."""
    if not 0 < fraction <= 0.95:
        raise TopobindError(f"memory fraction must be in (0, 0.95], got {fraction}")
    n = math.isqrt(int(mem_bytes * fraction / 8))
    return max(nb, n // nb * nb)


def make_config(
    ranks: int,
    n: int | None = None,
    nb: int = DEFAULT_NB,
    mem_fraction: float = 0.02,
    mem_bytes: int | None = None,
) -> HplConfig:
    if nb < 1:
        raise TopobindError(f"--nb must be >= 1, got {nb}")
    p, q = grid(ranks)
    if n is None:
        n = problem_size(total_memory_bytes() if mem_bytes is None else mem_bytes, mem_fraction, nb)
    else:
        if n < nb:
            raise TopobindError(f"--n {n} is smaller than NB {nb}; use --n >= {nb}")
        n = n // nb * nb
    return HplConfig(n=n, nb=nb, p=p, q=q)


def hpl_dat(cfg: HplConfig) -> str:
    """HPL.dat text (HPL 2.x format) for one N, one NB, one P x Q grid."""
    rows = [
        ("HPL.out", "output file name (if any)"),
        ("6", "device out (6=stdout,7=stderr,file)"),
        ("1", "# of problems sizes (N)"),
        (str(cfg.n), "Ns"),
        ("1", "# of NBs"),
        (str(cfg.nb), "NBs"),
        ("0", "PMAP process mapping (0=Row-,1=Column-major)"),
        ("1", "# of process grids (P x Q)"),
        (str(cfg.p), "Ps"),
        (str(cfg.q), "Qs"),
        ("16.0", "threshold"),
        ("1", "# of panel fact"),
        ("2", "PFACTs (0=left, 1=Crout, 2=Right)"),
        ("1", "# of recursive stopping criterium"),
        ("4", "NBMINs (>= 1)"),
        ("1", "# of panels in recursion"),
        ("2", "NDIVs"),
        ("1", "# of recursive panel fact."),
        ("1", "RFACTs (0=left, 1=Crout, 2=Right)"),
        ("1", "# of broadcast"),
        ("1", "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"),
        ("1", "# of lookahead depth"),
        ("1", "DEPTHs (>=0)"),
        ("2", "SWAP (0=bin-exch,1=long,2=mix)"),
        ("64", "swapping threshold"),
        ("0", "L1 in (0=transposed,1=no-transposed) form"),
        ("0", "U  in (0=transposed,1=no-transposed) form"),
        ("1", "Equilibration (0=no,1=yes)"),
        ("8", "memory alignment in double (> 0)"),
    ]
    head = "HPLinpack benchmark input file\nWritten by topobind (topobind.bench.hpl)\n"
    return head + "".join(f"{v:<13}{c}\n" for v, c in rows)


def hpccinf_txt(cfg: HplConfig) -> str:
    """hpccinf.txt: HPL.dat, the ignored separator line 32, and HPCC's PTRANS lines 33-36
    (no additional PTRANS sizes, so PTRANS stays as small as N allows)."""
    return (
        hpl_dat(cfg)
        + "##### This line (no. 32) is ignored (it serves as a separator). ######\n"
        + "0            Number of additional problem sizes for PTRANS\n"
        + f"{cfg.n:<13}values of N\n"
        + "0            number of additional blocking sizes for PTRANS\n"
        + f"{cfg.nb:<13}values of NB\n"
    )


@dataclass(frozen=True)
class HplOutput:
    variant: str  # T/V column, e.g. WR11C2R4
    n: int
    nb: int
    p: int
    q: int
    time: float  # seconds
    gflops: float
    residual: float
    passed: bool


_RESULT_RE = re.compile(
    r"^(W[RC]\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)\s*$", re.M
)
_RESID_RE = re.compile(r"^\|\|Ax-b\|\|.*=\s*([0-9.eE+-]+)\s*\.+\s*(PASSED|FAILED)\s*$", re.M)
_TFLOPS_RE = re.compile(r"^HPL_Tflops=([0-9.eE+-]+)\s*$", re.M)


def parse_output(text: str, source: str = "HPL output") -> HplOutput:
    """The first test of an HPL (xhpl stdout) or hpcc (hpccoutf.txt) output."""
    section = text
    if "Begin of HPL section." in text:
        section = text.split("Begin of HPL section.", 1)[1]
        if "End of HPL section." not in section:
            raise TopobindError(
                f"{source}: truncated hpcc output (no 'End of HPL section.'); did hpcc finish?"
            )
        section = section.split("End of HPL section.", 1)[0]
    m = _RESULT_RE.search(section)
    if m is None:
        raise TopobindError(
            f"{source}: no HPL result line (T/V N NB P Q Time Gflops, e.g. 'WR11C2R4 ...'); "
            "HPL did not finish a test"
        )
    r = _RESID_RE.search(section, m.end())
    if r is None:
        raise TopobindError(
            f"{source}: HPL result line found but no residual check line (||Ax-b||... "
            "PASSED/FAILED); output truncated?"
        )
    gflops = float(m.group(7))
    t = _TFLOPS_RE.search(text)
    if t is not None and "Begin of HPL section." in text:
        gflops = float(t.group(1)) * 1000.0  # the summary has more digits than the table
    return HplOutput(
        variant=m.group(1),
        n=int(m.group(2)),
        nb=int(m.group(3)),
        p=int(m.group(4)),
        q=int(m.group(5)),
        time=float(m.group(6)),
        gflops=gflops,
        residual=float(r.group(1)),
        passed=r.group(2) == "PASSED",
    )


def find_hpl() -> tuple[str, str]:
    """("xhpl"|"hpcc", path): xhpl on PATH first, else hpcc."""
    for name in ("xhpl", "hpcc"):
        path = shutil.which(name)
        if path:
            return name, path
    raise TopobindError(
        "no HPL found: install Debian's hpcc (apt-get install hpcc) or put xhpl on PATH"
    )


@dataclass(frozen=True)
class HplRun:
    output: HplOutput
    doc: dict[str, Any]
    program: str
    argv: list[str]
    text: str  # the HPL output (hpccoutf.txt or xhpl stdout)


def hpl_result(
    plan: Plan,
    out: HplOutput,
    *,
    started: str,
    pages: Pages | None,
    params: dict[str, Any],
    host: str | None = None,
) -> Result:
    """The result of one HPL run (``kernel`` hpl): HPL's GFLOP/s and time as single-trial
    metrics, the planned placement (mpirun binds; not measured), the residual check."""
    verdict = "PASSED" if out.passed else "FAILED"
    return Result(
        schema=RESULT_SCHEMA_ID,
        kernel="hpl",
        host=host or os.uname().nodename,
        timestamp=started,
        layout=plan.layout,
        tier=tier_from_environment(),  # the check's, as the C kernels write it
        ranks=plan.nranks,
        threads=plan.threads,
        params={
            "N": out.n,
            "NB": out.nb,
            "P": out.p,
            "Q": out.q,
            "time": out.time,
            "variant": out.variant,
            "residual": out.residual,
            **params,
            "placement_source": "planned (mpirun --bind-to; not measured)",
        },
        pages=pages,
        placement=tuple(
            Placement(rank=r.rank, thread=t, cpu=-1, numa=-1, affinity=tuple(r.cpus))
            for r in plan.ranks
            for t in range(plan.threads)
        ),
        metrics={
            "gflops": Metric.of_trials("GFLOP/s", True, [out.gflops]),
            "time": Metric.of_trials("s", False, [out.time]),
        },
        headline=Headline("gflops", "best", out.gflops, "GFLOP/s", True),
        matrices={},
        valid=out.passed,
        validation=f"HPL scaled residual {out.residual:.7g} {verdict} (threshold 16.0)",
    )


def _pages_doc(pages: str, report: Path | None) -> Pages | None:
    if pages == "none":
        return None
    kib, note, method = 4, "shim report missing", "mmap-4k"
    reports = sorted(report.parent.glob(report.name.replace("{rank}", "*"))) if report else []
    kibs: list[int] = []
    allocs = 0

    for path in reports:
        doc = json.loads(path.read_text())
        allocs += int(doc.get("huge_allocations", 0))
        if doc.get("page_kib") is not None:
            kibs.append(int(doc["page_kib"]))
    if kibs:
        kib = min(kibs)
        method = {1048576: "hugetlb-1G", 2048: "hugetlb-2M"}.get(kib, "mmap-4k")
    want = 1048576 if pages == "1G" else 2048
    got = (
        f"smallest page obtained {kib} KiB (read back from /proc/self/smaps)"
        if kibs
        else "so all memory came from the normal allocator (4 KiB pages assumed, not read back)"
    )
    note = (
        f"LD_PRELOAD {HUGEPAGE_SHIM} TOPOBIND_HUGE_PAGES={pages} "
        f"TOPOBIND_HUGE_MIN={os.environ.get('TOPOBIND_HUGE_MIN', HUGE_MIN)}: {allocs} "
        f"allocation(s) at or above the threshold over {len(reports)} rank(s), {got}"
    )
    return Pages(requested=pages, kib=kib, fallback=kib != want, note=note, method=method)


def _hpcc_section(outfile: Path) -> str | None:
    """The HPC Challenge test hpcc is in now (its last 'Begin of X section.' line)."""
    try:
        text = outfile.read_text(errors="replace")
    except OSError:
        return None
    begins = re.findall(r"^Begin of (\w+) section\.", text, re.M)
    return begins[-1] if begins else None


_RULE = re.compile(r"\s*-{20,}\s*")


def mpirun_error(text: str) -> str:
    """One line for a failed mpirun: the program's own last line of output outside OpenMPI's
    banner blocks (framed by lines of dashes), then the first paragraph of the first block."""
    own: list[str] = []
    first_block: list[str] = []
    inside, blocks = False, 0
    for line in text.splitlines():
        if _RULE.fullmatch(line):
            inside = not inside
            blocks += inside
            continue
        if not line.strip():
            if inside and blocks == 1 and first_block:
                blocks += 1  # the first paragraph ends
            continue
        if not inside:
            own.append(line.strip())
        elif blocks == 1:
            first_block.append(line.strip())
    parts = ([own[-1]] if own else []) + ([" ".join(first_block)] if first_block else [])
    return "; mpirun: ".join(parts) if parts else "(no message)"


def hpl_launcher(exe: str) -> str:
    """The launcher installed with the MPI ``exe`` links (Debian's hpcc: OpenMPI 4)."""
    from topobind.launch.mpi_launchers import REGISTRY
    from topobind.launch.mpi_launchers.linked import linked_mpi
    from topobind.launch.resolve import installed_with

    linked = linked_mpi(exe)
    owner = installed_with(linked) if linked is not None else None
    if owner is not None:
        return owner.name
    if REGISTRY["openmpi4"].detect() is None:
        raise TopobindError(f"{MPIRUN4} (OpenMPI 4, which hpcc is linked against) not found")
    return "openmpi4"


def run_hpl(
    plan: Plan,
    *,
    n: int | None = None,
    nb: int = DEFAULT_NB,
    mem_fraction: float = 0.02,
    pages: str = "none",
    timeout: float = 3600.0,
    workdir: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    heartbeat: float = 15.0,
) -> HplRun:
    """Run HPL with ``plan.nranks`` ranks through OpenMPI 4's mpirun and the plan's flags.

    ``progress`` gets a line when the run starts and one every ``heartbeat`` seconds while it
    runs (elapsed time, and for hpcc the HPC Challenge test it is in)."""
    if pages not in ("1G", "2M", "none"):
        raise TopobindError(f"hpl --pages {pages!r}: choose one of 1G, 2M, none")
    program, exe = find_hpl()
    launcher = hpl_launcher(exe)
    cfg = make_config(plan.nranks, n=n, nb=nb, mem_fraction=mem_fraction)
    extra = {"OPENBLAS_NUM_THREADS": str(plan.threads)}
    # the one scratch-directory context of the launch (launch/run.py), on this node
    with jobrun.scratch("topobind-hpl-", str(workdir) if workdir is not None else None) as tmp:
        wd = Path(tmp)
        report: Path | None = None
        if pages != "none":
            report = wd / "huge-{rank}.json"
            extra.update(
                LD_PRELOAD=str(find_kernel(HUGEPAGE_SHIM)),
                TOPOBIND_HUGE_PAGES=pages,
                TOPOBIND_HUGE_REPORT=str(report),
                TOPOBIND_HUGE_MIN=os.environ.get("TOPOBIND_HUGE_MIN", HUGE_MIN),
            )
        # The one launch path: the launcher of the MPI hpcc links, the plan's flags, one node.
        shape = job_shape(
            plan,
            RunOptions(launcher=launcher),
            workdir=str(wd),
            nodes=1,
            env=extra,
            forward=("OMP_NUM_THREADS", *extra),
        )
        launch = build(shape, [exe])
        jobrun.write_files(launch)
        if program == "hpcc":
            (wd / "hpccinf.txt").write_text(hpccinf_txt(cfg))
        else:
            (wd / "HPL.dat").write_text(hpl_dat(cfg))
        argv = launch.argv
        started = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        t0 = time.monotonic()
        outfile = wd / "hpccoutf.txt"
        if progress is not None:
            progress(
                f"hpl: {program} N={cfg.n} NB={cfg.nb} P={cfg.p} Q={cfg.q}, {plan.nranks} rank(s)"
                + (" (hpcc runs every HPC Challenge test, HPL last)" if program == "hpcc" else "")
            )

        def beat(elapsed: float) -> None:
            if progress is not None:
                section = _hpcc_section(outfile) if program == "hpcc" else None
                progress(
                    f"hpl: {elapsed:.0f} s" + (f", hpcc in its {section} test" if section else "")
                )

        proc = run_process(
            argv,
            env={**os.environ, **launch.env},
            cwd=wd,
            timeout=timeout,
            capture=True,
            capture_stderr=True,
            heartbeat=heartbeat,
            on_heartbeat=beat,
            what=program,
        )
        wall = time.monotonic() - t0
        text = (
            outfile.read_text(errors="replace")
            if program == "hpcc" and outfile.exists()
            else proc.stdout
        )
        if proc.returncode != 0:
            raise TopobindError(
                f"{program} under mpirun exited with status {proc.returncode}: "
                f"{mpirun_error(proc.stderr or proc.stdout)}"
            )
        out = parse_output(
            text, f"{program} output ({outfile.name if program == 'hpcc' else 'stdout'})"
        )
        pages_doc = _pages_doc(pages, report)
    result = hpl_result(
        plan,
        out,
        started=started,
        pages=pages_doc,
        params={
            "program": program,
            "program_path": exe,
            "mpirun": argv[: argv.index(exe)],
            "wall_seconds": round(wall, 3),
            "note": "hpcc runs all HPC Challenge tests; wall_seconds covers all of them, "
            "time/gflops are HPL's own"
            if program == "hpcc"
            else "xhpl",
        },
    )
    doc = result_document(result)
    return HplRun(output=out, doc=doc, program=program, argv=argv, text=text)
