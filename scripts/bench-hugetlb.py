#!/usr/bin/env python3
"""Hugepages for programs we do not build: topobind's LD_PRELOAD shim (rankstep/hugepreload.c)
against glibc's own ``GLIBC_TUNABLES=glibc.malloc.hugetlb=<page size>`` (glibc >= 2.35).

HPL (Debian's hpcc, 2 ranks through OpenMPI 4's mpirun, the same hpccinf.txt) and DGEMM (a
malloc'd C program calling OpenBLAS cblas_dgemm) run interleaved, run by run, with:

  4k          no shim, no tunable (the allocator's default pages)
  shim-2M     LD_PRELOAD=libtbhugepages.so TOPOBIND_HUGE_PAGES=2M (allocations >= 16 MiB)
  glibc-2M    GLIBC_TUNABLES=glibc.malloc.hugetlb=2097152 (every mmap'd chunk, >= 128 KiB)
  shim-1G     the shim with 1 GiB pages (1G -> 2M -> 4K fallback)
  glibc-1G    GLIBC_TUNABLES=glibc.malloc.hugetlb=1073741824

Each run records its GFLOP/s, its exit status (with the end of stderr when it failed) and the
most hugetlb memory of each page size its processes mapped (MiB; /proc/PID/smaps of the
process tree, sampled every 100 ms). The
pools are reserved at the start and set back to what they were at the end.

    .venv/bin/python scripts/bench-hugetlb.py [-o results/bench/hugetlb.json] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from bench_summary import add_summary, target  # noqa: E402 (scripts/: make bench's summary)

from topobind.bench.hpl import hpccinf_txt, make_config  # noqa: E402
from topobind.fsutil import atomic_write_text  # noqa: E402

MPIRUN4 = "/usr/bin/mpirun"
SHIM = ROOT / "rankstep" / "bin" / "libtbhugepages.so"
POOLS = {"2M": 2048, "1G": 1048576}  # kB
WANT = {"2M": 1024, "1G": 4}  # 2 GiB of 2 MiB pages, 4 GiB of 1 GiB pages
HPL_N, HPL_NB = 3840, 192
DGEMM_N, DGEMM_REPS = 2048, 5

VARIANTS: dict[str, dict[str, str]] = {
    "4k": {},
    "shim-2M": {"LD_PRELOAD": str(SHIM), "TOPOBIND_HUGE_PAGES": "2M", "TOPOBIND_HUGE_MIN": "16M"},
    "glibc-2M": {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2097152"},
    "shim-1G": {"LD_PRELOAD": str(SHIM), "TOPOBIND_HUGE_PAGES": "1G", "TOPOBIND_HUGE_MIN": "16M"},
    "glibc-1G": {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1073741824"},
}

DGEMM_C = r"""
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char **argv) {
  int n = atoi(argv[1]), reps = atoi(argv[2]); size_t nn = (size_t)n * n;
  double *a = malloc(nn * 8), *b = malloc(nn * 8), *c = malloc(nn * 8), best = 0;
  if (!a || !b || !c) return 3;
  for (size_t i = 0; i < nn; i++) { a[i] = 1e-3 * (i % 97); b[i] = 1e-3 * (i % 89); c[i] = 0; }
  for (int r = 0; r < reps; r++) {
    double t = now();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
    double g = 2.0 * n * n * (double)n / (now() - t) / 1e9; if (g > best) best = g; }
  printf("%.3f\n", best); return 0; }
"""


def pool_path(size: str, leaf: str) -> Path:
    return Path(f"/sys/kernel/mm/hugepages/hugepages-{POOLS[size]}kB/{leaf}")


def read_pool(size: str, leaf: str) -> int:
    return int(pool_path(size, leaf).read_text())


def descendants(root: int) -> list[int]:
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += [c for c, p in parent.items() if p == pid]
    return found


def hugetlb_kib(pid: int) -> dict[str, int]:
    """kB of hugetlb memory the process maps, by page size (from /proc/PID/smaps)."""
    out = dict.fromkeys(POOLS, 0)
    size = ""
    try:
        text = Path(f"/proc/{pid}/smaps").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if line.startswith("KernelPageSize:"):
            size = {"2048": "2M", "1048576": "1G"}.get(line.split()[1], "")
        elif line.startswith("Private_Hugetlb:") and size:
            out[size] += int(line.split()[1])
    return out


def run(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, float]]:
    """Run, sampling every 100 ms the hugetlb memory of the whole process tree (MiB, peak)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    peak = dict.fromkeys(POOLS, 0.0)
    with subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        box: dict[str, str] = {}
        reader = threading.Thread(
            target=lambda: box.update(
                zip(("out", "err"), proc.communicate(timeout=900), strict=True)
            )
        )
        reader.start()
        while reader.is_alive():
            now = dict.fromkeys(POOLS, 0)
            for pid in descendants(proc.pid):
                for s, kib in hugetlb_kib(pid).items():
                    now[s] += kib
            peak = {s: max(peak[s], now[s] / 1024) for s in POOLS}
            reader.join(0.1)
    done = subprocess.CompletedProcess(
        argv, proc.returncode, box.get("out", ""), box.get("err", "")
    )
    return done, peak


def wrapped(extra: dict[str, str], program: list[str]) -> list[str]:
    """The program under its variant's variables (only the ranks get them, never mpirun)."""
    return ["env", *(f"{k}={v}" for k, v in extra.items()), *program] if extra else program


def hpl_once(variant: str, wd: Path) -> dict[str, Any]:
    out = wd / "hpccoutf.txt"
    out.unlink(missing_ok=True)
    argv = [
        MPIRUN4,
        "-np",
        "2",
        "--bind-to",
        "core",
        *wrapped(VARIANTS[variant], ["/usr/bin/hpcc"]),
    ]
    t0 = time.monotonic()
    proc, peak = run(argv, wd)
    doc: dict[str, Any] = {"rc": proc.returncode, "wall_seconds": round(time.monotonic() - t0, 2)}
    doc["hugetlb_mib_peak"] = peak
    kv = (
        dict(re.findall(r"^(\w+)=(\S+)$", out.read_text(errors="replace"), re.M))
        if out.exists()
        else {}
    )
    if proc.returncode == 0 and "HPL_Tflops" in kv:
        doc["gflops"] = round(float(kv["HPL_Tflops"]) * 1000.0, 2)
    else:
        doc["error"] = (proc.stderr or proc.stdout).strip()[-300:]
    return doc


def dgemm_once(variant: str, exe: Path, wd: Path) -> dict[str, Any]:
    argv = wrapped(VARIANTS[variant], [str(exe), str(DGEMM_N), str(DGEMM_REPS)])
    proc, peak = run(argv, wd)
    doc: dict[str, Any] = {"rc": proc.returncode, "hugetlb_mib_peak": peak}
    if proc.returncode == 0:
        doc["gflops"] = float(proc.stdout.split()[0])
    else:
        doc["error"] = proc.stderr.strip()[-300:]
    return doc


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r["gflops"] for r in runs if "gflops" in r]
    doc: dict[str, Any] = {"runs": len(runs), "failed": len(runs) - len(ok)}
    if ok:
        doc.update(median=round(statistics.median(ok), 2), min=min(ok), max=max(ok))
    doc["hugetlb_mib_peak"] = {s: max(r["hugetlb_mib_peak"][s] for r in runs) for s in POOLS}
    errors = sorted({r["error"].splitlines()[-1] for r in runs if r.get("error")})
    if errors:
        doc["errors"] = errors
    return doc


def build_dgemm(wd: Path) -> Path:
    src, exe = wd / "ref_dgemm.c", wd / "ref_dgemm"
    src.write_text(DGEMM_C)
    subprocess.run(["cc", "-O2", str(src), "-o", str(exe), "-lopenblas"], check=True)
    return exe


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default="results/bench/hugetlb.json")
    ap.add_argument("--repeat", type=int, default=int(os.environ.get("BENCH_REPEAT", "5")))
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("hpcc") or not SHIM.exists():
        print("bench-hugetlb: needs root, hpcc and rankstep/bin/libtbhugepages.so", file=sys.stderr)
        return 2
    before = {s: read_pool(s, "nr_hugepages") for s in POOLS}
    try:
        for s, n in WANT.items():
            pool_path(s, "nr_hugepages").write_text(str(max(n, before[s])))
        got = {s: read_pool(s, "nr_hugepages") for s in POOLS}
        results: dict[str, dict[str, list[dict[str, Any]]]] = {"hpl": {}, "dgemm": {}}
        with tempfile.TemporaryDirectory(prefix="bench-hugetlb-") as tmp:
            wd = Path(tmp)
            (wd / "hpccinf.txt").write_text(hpccinf_txt(make_config(2, n=HPL_N, nb=HPL_NB)))
            exe = build_dgemm(wd)
            for rep in range(args.repeat):
                for v in VARIANTS:
                    h = hpl_once(v, wd)
                    d = dgemm_once(v, exe, wd)
                    results["hpl"].setdefault(v, []).append(h)
                    results["dgemm"].setdefault(v, []).append(d)
                    print(
                        f"[{rep + 1}/{args.repeat}] {v:9s} HPL {h.get('gflops', 'FAILED')}"
                        f" DGEMM {d.get('gflops', 'FAILED')} MiB of hugetlb"
                        f" HPL {h['hugetlb_mib_peak']} DGEMM {d['hugetlb_mib_peak']}",
                        file=sys.stderr,
                    )
    finally:
        for s, n in before.items():
            pool_path(s, "nr_hugepages").write_text(str(n))
    doc = {
        "schema": "topobind.bench.runs-hugetlb/1",
        "glibc": os.confstr("CS_GNU_LIBC_VERSION"),
        "pools_reserved": got,
        "load_average_start": os.getloadavg(),
        "hpl": {
            "N": HPL_N,
            "NB": HPL_NB,
            "ranks": 2,
            **{v: summary(r) for v, r in results["hpl"].items()},
        },
        "dgemm": {
            "N": DGEMM_N,
            "threads": 1,
            **{v: summary(r) for v, r in results["dgemm"].items()},
        },
        "raw": results,
    }
    runs = [r for k in ("hpl", "dgemm") for v in results[k].values() for r in v]
    failed = sum("gflops" not in r for r in runs)
    add_summary(doc, [target("HPL and DGEMM runs that failed", failed, "0 (figures: no target)",
                             failed == 0)])  # fmt: skip
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(str(out), json.dumps(doc, indent=1) + "\n")
    print(json.dumps({k: doc[k] for k in ("hpl", "dgemm")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
