#!/usr/bin/env python3
"""Benchmark: our kernels against reference tools, same threads, same sizes, in one run.

Writes results/bench/kernels.json (atomically) and prints a short table.

1. STREAM triad: kernels/bin/stream vs likwid-bench's STREAM triad (``stream_*`` kernels:
   A = B*s + C, 3 streams; likwid's ``triad_*`` kernels are the 4-stream A = B*C + D and are
   NOT STREAM's triad), each store kind against its own: plain stores vs ``stream_<isa>``,
   non-temporal stores (``--nontemporal``) vs ``stream_mem_<isa>`` (which skip the
   write-allocate read, so they move less real traffic for the same counted bytes); and vs
   hpcc's StarSTREAM Triad (plain stores).
2. DGEMM: kernels/bin/dgemm (median of reps) vs a tiny C program calling OpenBLAS cblas_dgemm.
3. HPL: ``topobind bench hpl`` vs plain ``mpirun -np 2 hpcc`` with the same hpccinf.txt.
   Both are the same binary (Debian's hpcc); the difference is topobind's binding flags and
   the hugepage shim.
4. Latency at a 1 GiB working set with 4 KiB, 2 MiB and 1 GiB pages.

Threads: 2 (OMP_PLACES={0},{1}, OMP_PROC_BIND=close). Every comparison is repeated REPEAT
times (env BENCH_REPEAT, default 5), the runs of the two sides interleaved so that load from
other jobs hits both; the median is reported, min and max kept. A missing reference tool is
recorded as skipped with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from bench_summary import add_summary, target  # noqa: E402 (scripts/: make bench's summary)

from topobind.bench.hpl import hpccinf_txt, make_config  # noqa: E402
from topobind.fsutil import atomic_write_text  # noqa: E402
from topobind.measure.hugepages import hugepages_status, reserve_hugepages  # noqa: E402
from topobind.measure.programs import run_kernel  # noqa: E402

OUT = REPO / "results" / "bench" / "kernels.json"
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
MPIRUN4 = "/usr/bin/mpirun"
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
HPL_REPEAT = 6
THREADS = 2
OMP = {"OMP_NUM_THREADS": "2", "OMP_PLACES": "{0},{1}", "OMP_PROC_BIND": "close"}
STREAM_N = 20_000_000  # elements per array: 160 MB, 4.3 x the 37.5 MB L3
DGEMM_N, DGEMM_REPS = 2048, 10
HPL_N, HPL_NB = 3840, 192
LIKWID_CANDIDATES = (
    "stream_avx512_fma",
    "stream_mem_avx512",
    "stream_avx_fma",
    "stream_mem_avx_fma",
    "stream_avx",
    "stream_mem_avx",
    "stream_sse",
    "stream_mem_sse",
)
TARGETS = {"stream": 1.0, "dgemm": 0.98, "hpl": 1.0}
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

DGEMM_C = r"""
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a,
  y = *(const double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  int n = atoi(argv[1]), reps = atoi(argv[2]), threads = atoi(argv[3]);
  openblas_set_num_threads(threads);
  size_t nn = (size_t)n * n;
  double *a = malloc(nn * 8), *b = malloc(nn * 8), *c = malloc(nn * 8);
  double *g = malloc(reps * sizeof *g);
  for (size_t i = 0; i < nn; i++) { a[i] = (double)(i % 97) / 97.0;
    b[i] = (double)(i % 89) / 89.0; c[i] = 0.0; }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
    g[r] = 2.0 * n * (double)n * n / (now() - t0) / 1e9;
  }
  for (int r = 0; r < reps; r++) printf("%.6f%c", g[r], r + 1 < reps ? ' ' : '\n');
  qsort(g, reps, sizeof *g, cmp);
  printf("%.6f %d\n", reps % 2 ? g[reps / 2] : 0.5 * (g[reps / 2 - 1] + g[reps / 2]),
         openblas_get_num_threads());
  free(a); free(b); free(c); free(g);
  return 0;
}
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def series(values: list[float]) -> dict[str, Any]:
    return {
        "values": values,
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def env_with(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


# --------------------------------------------------------------------------- STREAM
def our_stream(elements: int, nontemporal: bool = False) -> dict[str, Any]:
    args = ["--elements", str(elements), "--trials", "10"] + ["--nontemporal"] * nontemporal
    r = run_kernel("stream", args, env=OMP)
    m = r.metrics["triad"]
    return {"best": m.best, "avg": m.avg, "pages_kib": r.pages.kib if r.pages else None}


def likwid_kernels() -> list[str]:
    out = subprocess.run(["likwid-bench", "-a"], capture_output=True, text=True, check=True)
    names = {ln.split(" - ", 1)[0].strip() for ln in out.stdout.splitlines() if " - " in ln}
    flags = cpu_flags()
    ok = []
    for k in LIKWID_CANDIDATES:
        if k not in names:
            continue
        if "avx512" in k and "avx512f" not in flags:
            continue
        if "avx" in k and "avx" not in flags:
            continue
        if "fma" in k and "fma" not in flags:
            continue
        ok.append(k)
    return ok


def likwid_stream(kernel: str, total_bytes: int) -> dict[str, Any]:
    argv = ["likwid-bench", "-t", kernel, "-w", f"S0:{total_bytes}B:{THREADS}", "-i", "10"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=300).stdout

    def grab(key: str) -> float:
        m = re.search(rf"^{re.escape(key)}:\s+([0-9.eE+-]+)", out, re.M)
        if m is None:
            raise RuntimeError(f"likwid-bench output has no '{key}:' line")
        return float(m.group(1))

    t, vol, size, mbs = grab("Time"), grab("Data volume (Byte)"), grab("Size (Byte)"), 0.0
    mbs = grab("MByte/s")
    return {
        "argv": argv,
        "mbyte_s": mbs,
        "time_s": t,
        "data_volume_bytes": vol,
        "size_bytes": size,
        "rate_1e6Bps": vol / t / 1e6,
        "iterations_per_thread": grab("Iterations per thread"),
    }


# --------------------------------------------------------------------------- hpcc (plain)
def plain_hpcc(n: int, nb: int) -> dict[str, Any]:
    cfg = make_config(2, n=n, nb=nb)
    with tempfile.TemporaryDirectory(prefix="bench-hpcc-") as tmp:
        wd = Path(tmp)
        (wd / "hpccinf.txt").write_text(hpccinf_txt(cfg))
        argv = [
            MPIRUN4,
            "-np",
            "2",
            "-x",
            "OMP_NUM_THREADS",
            "-x",
            "OPENBLAS_NUM_THREADS",
            "/usr/bin/hpcc",
        ]
        env = env_with({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", **ROOT_ENV})
        t0 = time.monotonic()
        proc = subprocess.run(argv, cwd=wd, env=env, capture_output=True, text=True, timeout=900)
        wall = time.monotonic() - t0
        text = (wd / "hpccoutf.txt").read_text(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"hpcc exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    kv = dict(re.findall(r"^(\w+)=(\S+)$", text, re.M))
    return {
        "argv": argv,
        "hpccinf": {"N": cfg.n, "NB": cfg.nb, "P": cfg.p, "Q": cfg.q},
        "wall_seconds": round(wall, 2),
        "hpl_gflops": float(kv["HPL_Tflops"]) * 1000.0,
        "hpl_time": float(kv.get("HPL_time", "nan")),
        "stream_vector_size": int(kv["STREAM_VectorSize"]),
        "stream_threads": int(kv["STREAM_Threads"]),
        "star_triad_gbs": float(kv["StarSTREAM_Triad"]),
        "single_triad_gbs": float(kv["SingleSTREAM_Triad"]),
        "procs": int(kv["CommWorldProcs"]),
    }


def topobind_hpl(n: int, nb: int, pages: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-tbhpl-") as tmp:
        argv = [
            TOPOBIND,
            "bench",
            "hpl",
            "--ranks",
            "2",
            "--n",
            str(n),
            "--nb",
            str(nb),
            "--pages",
            pages,
            "--results",
            tmp,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"topobind bench hpl exited {proc.returncode}: {proc.stderr}")
        path = next(Path(tmp).rglob("*.json"))
        doc = json.loads(path.read_text())
    return {
        "argv": argv,
        "gflops": doc["headline"]["value"],
        "time": doc["params"]["time"],
        "wall_seconds": doc["params"]["wall_seconds"],
        "mpirun": doc["params"]["mpirun"],
        "pages": doc["pages"],
        "valid": doc["valid"],
    }


# --------------------------------------------------------------------------- DGEMM
def build_openblas_dgemm(tmp: Path) -> Path:
    src, exe = tmp / "ref_dgemm.c", tmp / "ref_dgemm"
    src.write_text(DGEMM_C)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc) on PATH")
    inc = subprocess.run(["pkg-config", "--cflags", "openblas"], capture_output=True, text=True)
    flags = inc.stdout.split() if inc.returncode == 0 else []
    subprocess.run(
        [cc, "-O2", *flags, str(src), "-o", str(exe), "-lopenblas"],
        check=True,
        capture_output=True,
        text=True,
    )
    return exe


def our_dgemm() -> float:
    r = run_kernel("dgemm", ["--n", str(DGEMM_N), "--reps", str(DGEMM_REPS)], env=OMP)
    assert r.headline is not None
    return r.headline.value


def ref_dgemm(exe: Path) -> dict[str, Any]:
    out = subprocess.run(
        [str(exe), str(DGEMM_N), str(DGEMM_REPS), str(THREADS)],
        env=env_with(OMP),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout.split("\n")
    med, nthreads = out[1].split()
    return {
        "median": float(med),
        "trials": [float(x) for x in out[0].split()],
        "openblas_threads": int(nthreads),
    }


# --------------------------------------------------------------------------- latency
def latency(pages: str) -> dict[str, Any]:
    r = run_kernel(
        "latency",
        ["--sizes", "1G", "--pages", pages, "--cpu", "1", "--trials", "5"],
        env={"OMP_NUM_THREADS": "1"},
    )
    assert r.headline is not None and r.pages is not None
    metric = r.metrics[r.headline.metric]
    return {
        "requested": pages,
        "ns_median": r.headline.value,
        "trials": list(metric.trials),
        "min": metric.min,
        "max": metric.max,
        "page_kib_obtained": r.pages.kib,
        "fallback": r.pages.fallback,
        "note": r.pages.note,
    }


def skipped(reason: str) -> dict[str, Any]:
    log(f"  skipped: {reason}")
    return {"skipped": True, "reason": reason}


def ratio_entry(ours: float, ref: float, target: float) -> dict[str, Any]:
    r = ours / ref
    return {"ratio": round(r, 4), "target": target, "pass": r >= target}


def main() -> int:
    t_start = time.monotonic()
    load = os.getloadavg()
    doc: dict[str, Any] = {
        "benchmark": "kernels vs reference tools",
        "cpu_model": cpu_model(),
        "nproc": os.cpu_count(),
        "loadavg_at_start": list(load),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "threads": THREADS,
        "omp_env": OMP,
        "repeat": REPEAT,
        "hugepages_at_start": {
            k: {"nr": v.nr, "free": v.free} for k, v in hugepages_status().items()
        },
    }
    log(f"bench-kernels: {doc['cpu_model']}, load average {load[0]:.2f}, repeat {REPEAT}")

    # ---------------------------------------------------------------- 1. STREAM
    log("[1/4] STREAM triad: ours vs likwid-bench")
    total_bytes = 3 * STREAM_N * 8
    st: dict[str, Any] = {
        "elements_per_array": STREAM_N,
        "total_bytes": total_bytes,
        "byte_counting": "all figures are 1e6 bytes/s counting 3 arrays x 8 bytes per "
        "element per iteration (no write-allocate traffic): STREAM's convention; likwid-bench "
        "'stream_*' (A = B*s + C) reports 'Data volume' = 24 bytes/element x iterations "
        "(Load 16 + Store 8) and MByte/s = volume / time / 1e6, i.e. the same convention",
    }
    # Two store families, each compared with its own kind: plain stores (write-allocate) vs
    # likwid's stream_* kernels, non-temporal stores (--nontemporal) vs likwid's stream_mem_*.
    families = {"normal": [], "nontemporal": []}
    if shutil.which("likwid-bench") is None:
        st["likwid"] = skipped("likwid-bench not on PATH (Debian package likwid)")
    else:
        for k in likwid_kernels():
            families["nontemporal" if "_mem_" in k else "normal"].append(k)
    lk_by_family: dict[str, dict[str, Any]] = {}
    for family, cands in families.items():
        nt = family == "nontemporal"
        probe = {k: likwid_stream(k, total_bytes)["rate_1e6Bps"] for k in cands}
        kernel = max(probe, key=lambda k: probe[k]) if probe else None
        f_best: list[float] = []
        f_avg: list[float] = []
        lk_rates: list[float] = []
        for i in range(REPEAT):
            s = our_stream(STREAM_N, nontemporal=nt)
            f_best.append(s["best"])
            f_avg.append(s["avg"])
            st["ours_pages_kib"] = s["pages_kib"]
            if kernel is not None:
                lk_rates.append(likwid_stream(kernel, total_bytes)["rate_1e6Bps"])
            log(
                f"  {family} stores, run {i + 1}: ours best {s['best']:.0f} avg {s['avg']:.0f}"
                " MB/s" + (f", likwid {kernel} {lk_rates[-1]:.0f} MB/s" if lk_rates else "")
            )
        st[family] = {
            "ours_cmd": "OMP_NUM_THREADS=2 OMP_PLACES={0},{1} OMP_PROC_BIND=close "
            f"kernels/bin/stream --elements {STREAM_N} --trials 10" + (" --nontemporal" * nt),
            "ours_best_MBps": series(f_best),
            "ours_avg_MBps": series(f_avg),
        }
        if kernel is not None:
            lk_by_family[family] = {
                "probe_1e6Bps": probe,
                "kernel": kernel,
                "MBps": series(lk_rates),
                "note": "likwid's rate = data volume / total time of all iterations (an "
                "average over iterations, not STREAM's best trial); ours 'avg' is the "
                "like-for-like figure",
            }
    if "likwid" not in st:
        st["likwid"] = lk_by_family or skipped("no likwid stream kernel for this CPU")

    # ---------------------------------------------------------------- 3. HPL (+ hpcc STREAM)
    log(
        f"[2/4] HPL N={HPL_N} NB={HPL_NB} 1x2: topobind bench hpl vs plain mpirun hpcc "
        "(+ hpcc's STREAM)"
    )
    hpl: dict[str, Any] = {
        "N": HPL_N,
        "NB": HPL_NB,
        "P": 1,
        "Q": 2,
        "note": "both sides run the same binary, Debian's hpcc (HPL 2.0 "
        "inside HPCC 1.5.0); this compares 'topobind bench hpl --pages "
        "2M' (the plan's mpirun binding flags and the 2 MiB hugepage "
        "LD_PRELOAD shim; the ratio) and the same without the shim "
        "(ratio_no_shim) against a plain "
        "'mpirun -np 2 hpcc' (OpenMPI 4 defaults: bind to core for "
        "np <= 2)",
    }
    hp: dict[str, Any]
    have_hpcc = shutil.which("hpcc") is not None and os.path.exists(MPIRUN4)
    plain_runs: list[dict[str, Any]] = []
    tb_runs: list[dict[str, Any]] = []  # topobind bench hpl --pages 2M: HPL on hugepages
    tb_none_runs: list[dict[str, Any]] = []  # ... without the shim: binding flags only
    same_size: list[float] = []  # our STREAM triad (best) at hpcc's STREAM size
    if not have_hpcc:
        hp = skipped("hpcc or /usr/bin/mpirun missing")
    else:
        # 2 MiB pages for the shim (N=3840: ~59 MB of matrix per rank); the three sides
        # interleaved so that load from other jobs hits each alike
        try:
            with reserve_hugepages(2048, 600):
                for i in range(HPL_REPEAT):
                    tb_runs.append(topobind_hpl(HPL_N, HPL_NB, "2M"))
                    plain_runs.append(plain_hpcc(HPL_N, HPL_NB))
                    # ours at hpcc's STREAM size right after hpcc's own STREAM (same moment)
                    vs_all = plain_runs[-1]["stream_vector_size"] * plain_runs[-1]["procs"]
                    same_size.append(our_stream(vs_all)["best"])
                    tb_none_runs.append(topobind_hpl(HPL_N, HPL_NB, "none"))
                    log(
                        f"  run {i + 1}: topobind --pages 2M {tb_runs[-1]['gflops']:.2f}, plain "
                        f"hpcc {plain_runs[-1]['hpl_gflops']:.2f}, topobind --pages none "
                        f"{tb_none_runs[-1]['gflops']:.2f} GFLOP/s"
                    )
        except Exception as exc:  # noqa: BLE001 - recorded, not fatal
            hp = skipped(f"HPL runs failed: {exc}")
        hpl["topobind_runs"] = tb_runs
        hpl["topobind_no_shim_runs"] = tb_none_runs
        hpl["plain_hpcc_runs"] = plain_runs
        if tb_runs and plain_runs:
            ours = [r["gflops"] for r in tb_runs]
            plain = [r["hpl_gflops"] for r in plain_runs]
            hpl["topobind_gflops"] = series(ours)
            hpl["plain_gflops"] = series(plain)
            hpl["stat"] = (
                f"median of {HPL_REPEAT} interleaved runs each (the centre the project's "
                "statistics use; best-of favours the noisier side on this VM)"
            )
            hpl["ratio_best_of"] = round(max(ours) / max(plain), 4)
        if tb_none_runs and plain_runs:
            none = [r["gflops"] for r in tb_none_runs]
            hpl["topobind_no_shim_gflops"] = series(none)
            hpl["ratio_no_shim"] = round(statistics.median(none) / statistics.median(plain), 4)
    hpl_ok = bool(tb_runs and plain_runs)

    # hpcc STREAM: StarSTREAM = every rank runs a single-threaded STREAM at the same time
    if plain_runs:
        vs = plain_runs[0]["stream_vector_size"]
        procs = plain_runs[0]["procs"]
        agg = [r["star_triad_gbs"] * procs * 1000.0 for r in plain_runs]
        hs = {
            "vector_size_per_rank": vs,
            "ranks": procs,
            "threads_per_rank": plain_runs[0]["stream_threads"],
            "size_note": f"hpcc sizes STREAM from the HPL matrix: N^2/(3*P*Q) = {HPL_N}^2/6 = "
            f"{vs} elements per array per rank ({procs} ranks: {vs * procs} elements in all, "
            f"{3 * 8 * vs * procs / 1e6:.0f} MB over the 3 arrays). A plain hpcc with our "
            f"{STREAM_N // 1_000_000}M elements needs N=7680 and took 111 s here (RandomAccess "
            "dominates), so hpcc is compared at its own size: ours is re-run at that size",
            "star_triad_GBps_per_rank": [r["star_triad_gbs"] for r in plain_runs],
            "single_triad_GBps": [r["single_triad_gbs"] for r in plain_runs],
            "aggregate_MBps": series(agg),
            "aggregate_rule": "StarSTREAM_Triad (per-rank average, GB/s = 1e9 B/s, best of "
            "10 trials, 3 arrays counted) x ranks x 1000",
        }
        hs["ours_best_MBps_same_size"] = series(same_size)
        hs["pairing"] = "each of ours run right after one plain hpcc run (interleaved)"
        st["hpcc"] = hs
    else:
        st["hpcc"] = skipped("no plain hpcc run succeeded" if have_hpcc else "hpcc missing")

    # STREAM ratios, like for like: our avg vs likwid (both averages over iterations), our
    # best vs hpcc (both best trial) at hpcc's size
    comps = {}
    for family, lkf in lk_by_family.items():
        comps[f"likwid_{family}"] = ratio_entry(
            st[family]["ours_avg_MBps"]["median"], lkf["MBps"]["median"], TARGETS["stream"]
        )
        comps[f"likwid_{family}"]["basis"] = (
            f"median of ours avg-of-trials ({family} stores) / median of likwid {lkf['kernel']}"
        )
    if "aggregate_MBps" in st["hpcc"]:
        comps["hpcc"] = ratio_entry(
            st["hpcc"]["ours_best_MBps_same_size"]["median"],
            st["hpcc"]["aggregate_MBps"]["median"],
            TARGETS["stream"],
        )
        comps["hpcc"]["basis"] = "median of ours best at hpcc's size / median hpcc aggregate"
    st["ratios"] = comps
    if comps:
        worst = min((v for k, v in comps.items() if isinstance(v, dict)), key=lambda v: v["ratio"])
        st["ratio"] = worst["ratio"]
        st["ratio_rule"] = "ours / best of the others = the smallest like-for-like ratio"
        st["target"] = TARGETS["stream"]
        st["pass"] = worst["ratio"] >= TARGETS["stream"]
    doc["stream"] = st

    if hpl_ok:
        hpl.update(
            ratio_entry(
                hpl["topobind_gflops"]["median"], hpl["plain_gflops"]["median"], TARGETS["hpl"]
            )
        )
    doc["hpl"] = hpl if not (have_hpcc and not hpl_ok) else {**hpl, **hp}

    # ---------------------------------------------------------------- 2. DGEMM
    log(f"[3/4] DGEMM N={DGEMM_N}: ours vs OpenBLAS cblas_dgemm")
    dg: dict[str, Any] = {"n": DGEMM_N, "reps": DGEMM_REPS}
    with tempfile.TemporaryDirectory(prefix="bench-dgemm-") as tmp:
        try:
            exe = build_openblas_dgemm(Path(tmp))
        except (RuntimeError, subprocess.CalledProcessError) as exc:
            exe = None
            dg["openblas"] = skipped(f"cannot build the OpenBLAS reference: {exc}")
        ours, ref, refruns = [], [], []
        for i in range(REPEAT):
            ours.append(our_dgemm())
            if exe is not None:
                r = ref_dgemm(exe)
                refruns.append(r)
                ref.append(r["median"])
            log(
                f"  run {i + 1}: ours {ours[-1]:.2f}"
                + (f", OpenBLAS {ref[-1]:.2f}" if ref else "")
                + " GFLOP/s"
            )
    dg["ours_gflops"] = series(ours)
    dg["ours_cmd"] = (
        f"OMP_NUM_THREADS=2 OMP_PLACES={{0}},{{1}} OMP_PROC_BIND=close "
        f"kernels/bin/dgemm --n {DGEMM_N} --reps {DGEMM_REPS}"
    )
    if ref:
        dg["openblas"] = {
            "gflops": series(ref),
            "runs": refruns,
            "program": "cc -O2 ref_dgemm.c -lopenblas: malloc'd row-major "
            "matrices, openblas_set_num_threads(2), 1 warm-up + reps, median",
        }
        dg.update(
            ratio_entry(
                dg["ours_gflops"]["median"], dg["openblas"]["gflops"]["median"], TARGETS["dgemm"]
            )
        )
    doc["dgemm"] = dg

    # ---------------------------------------------------------------- 4. latency
    log("[4/4] latency, 1 GiB working set, CPU 1: 4 KiB vs 2 MiB vs 1 GiB pages")
    lat: dict[str, Any] = {"cmd": "kernels/bin/latency --sizes 1G --pages P --cpu 1 --trials 5"}
    lat["4k"] = latency("4k")
    try:
        with reserve_hugepages(2048, 520):
            lat["2M"] = latency("2M")
    except Exception as exc:  # noqa: BLE001
        lat["2M"] = skipped(f"2M pages: {exc}")
    try:
        with reserve_hugepages(1048576, 1):
            lat["1G"] = latency("1G")
    except Exception as exc:  # noqa: BLE001
        lat["1G"] = skipped(f"1G pages: {exc}")
    lat["hugepages_after"] = {
        k: {"nr": v.nr, "free": v.free} for k, v in hugepages_status().items()
    }
    doc["latency"] = lat

    doc["wall_seconds"] = round(time.monotonic() - t_start, 1)

    # ---------------------------------------------------------------- table
    def fmt(x: float) -> str:
        return f"{x:,.1f}"

    rows = []
    for family, lkf in lk_by_family.items():
        rows.append(
            (
                f"STREAM triad avg MB/s ({family} stores)",
                fmt(st[family]["ours_avg_MBps"]["median"]),
                f"likwid {lkf['kernel']}",
                fmt(lkf["MBps"]["median"]),
                comps[f"likwid_{family}"],
            )
        )
    if "hpcc" in comps:
        hs = st["hpcc"]
        rows.append(
            (
                f"STREAM triad best MB/s ({hs['vector_size_per_rank'] * hs['ranks']})",
                fmt(hs["ours_best_MBps_same_size"]["median"]),
                "hpcc StarSTREAM x2",
                fmt(hs["aggregate_MBps"]["median"]),
                comps["hpcc"],
            )
        )
    if "ratio" in dg:
        rows.append(
            (
                f"DGEMM GFLOP/s (N={DGEMM_N})",
                fmt(dg["ours_gflops"]["median"]),
                "OpenBLAS cblas_dgemm",
                fmt(dg["openblas"]["gflops"]["median"]),
                dg,
            )
        )
    if hpl_ok:
        rows.append(
            (
                f"HPL GFLOP/s (N={HPL_N}, 2M shim)",
                fmt(hpl["topobind_gflops"]["median"]),
                "plain mpirun hpcc",
                fmt(hpl["plain_gflops"]["median"]),
                hpl,
            )
        )
    add_summary(doc, [
        target(f"{name}: ours / {rn}", e["ratio"], f">= {e['target']:.2f}", bool(e["pass"]), "x")
        for name, _, rn, _, e in rows
    ])  # fmt: skip
    atomic_write_text(OUT, json.dumps(doc, indent=1) + "\n")
    print_2m = ""
    if "ratio_no_shim" in hpl:
        print_2m = (
            f"HPL medians of {HPL_REPEAT}: without the shim "
            f"{hpl['topobind_no_shim_gflops']['median']:,.1f} GFLOP/s = "
            f"{hpl['ratio_no_shim']:.3f} x plain hpcc; best-of ratio with the shim "
            f"{hpl['ratio_best_of']:.3f} (information, no target)"
        )
    print(f"{'measure':34} {'ours':>10}  {'reference':24} {'ref':>10}  ratio  target  pass")
    for name, o, rn, rv, e in rows:
        print(
            f"{name:34} {o:>10}  {rn:24} {rv:>10}  {e['ratio']:.3f}  {e['target']:.2f}   "
            f"{'yes' if e['pass'] else 'NO'}"
        )
    if print_2m:
        print(print_2m)
    for p in ("4k", "2M", "1G"):
        e = lat[p]
        if e.get("skipped"):
            print(f"latency 1 GiB, {p} pages: skipped ({e['reason']})")
        else:
            print(
                f"latency 1 GiB, {p} pages requested, {e['page_kib_obtained']} KiB obtained: "
                f"{e['ns_median']:.1f} ns"
            )
    print(
        f"CPU {doc['cpu_model']}, load average at start {load[0]:.2f}, "
        f"{doc['wall_seconds']} s; {OUT.relative_to(REPO)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
