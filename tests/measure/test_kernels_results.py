"""Kernels: command lines, JSON output, schema and the Python reader (real runs, small sizes)."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
from pathlib import Path

import jsonschema
import pytest
from conftest_kernels import omp_env
from paths import REPO

from topobind.errors import TopobindError
from topobind.measure import programs as kernels
from topobind.measure import results

KERNELS = ["stream", "dgemm", "latency", "c2c", "whereami"]
KSRC = REPO / "kernels"


pytestmark = pytest.mark.usefixtures("built_kernels")


@pytest.fixture(scope="module")
def small_dgemm_text(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("dgemm") / "d.json"
    kernels.run_kernel("dgemm", ["--n", "200", "--reps", "2", "--pages", "4k"], json_path=out)
    return out.read_text()


def test_schema_is_valid_draft_2020_12() -> None:
    schema = results.result_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.slow
@pytest.mark.parametrize("name", KERNELS)
def test_help_and_bad_arguments(name: str) -> None:
    ok = kernels.run_kernel_raw(name, ["--help"])
    assert ok.returncode == 0 and ok.stdout.startswith("usage:"), ok.stderr
    assert "--json" in ok.stdout
    bad = kernels.run_kernel_raw(name, ["--no-such-option"])
    assert bad.returncode == kernels.EXIT_USAGE
    assert bad.stdout == ""
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}: error: unknown option")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "args", "needle"),
    [
        ("stream", ["--pages", "3G"], "--pages must be one of"),
        ("stream", ["--elements", "12x"], "unknown suffix"),
        ("stream", ["--trials"], "needs a value"),
        ("dgemm", ["--n", "-5"], "--n must be an integer"),
        ("latency", ["--sizes", "16K,abc"], "--sizes"),
        ("latency", ["--mem-node", "99"], "not a NUMA node with memory"),
        ("latency", ["--sizes", "1G,1024M"], "listed twice"),
        ("latency", ["--cpu", "4000"], "--cpu"),
        ("c2c", ["--cpus", "0"], "need at least two CPUs"),
        ("c2c", ["--cpus", "0,0"], "listed twice"),
        ("whereami", ["--spin-ms", "x"], "--spin-ms"),
    ],
)
def test_bad_values_one_line_exit_2(
    name: str, args: list[str], needle: str, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    run = kernels.run_kernel_raw(name, ["--json", str(out), *args])
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and needle in run.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_json_file_is_atomic_and_expands_rank(tmp_path: Path) -> None:
    run = kernels.run_kernel_raw(
        "whereami",
        ["--spin-ms", "1", "--json", str(tmp_path / "w-{rank}.json")],
        env={"SLURM_PROCID": "3", "SLURM_NTASKS": "4"},
    )
    assert run.returncode == 0 and run.stdout == ""
    assert [p.name for p in tmp_path.iterdir()] == ["w-3.json"]
    res = results.load_result(tmp_path / "w-3.json")
    assert res.ranks == 4 and res.rank == 3 and {p.rank for p in res.placement} == {3}


@pytest.mark.slow
def test_a_kernel_writes_the_tier_it_is_told() -> None:
    """Issue 47 item 6: the checks set TOPOBIND_TIER; the envelope carries it (and nothing
    when it is unset or empty), and the schema takes it."""
    for tier, want in (("smoke", "smoke"), ("", None), (None, None)):
        run = kernels.run_kernel_raw("whereami", ["--spin-ms", "1"],
                                     env={**omp_env(1), "TOPOBIND_TIER": tier})  # fmt: skip
        assert run.returncode == 0, run.stderr
        doc = json.loads(run.stdout)
        assert doc.get("tier") == want and ("tier" in doc) == (want is not None), doc
        assert list(doc)[4:6] == (["layout", "tier"] if want else ["layout", "ranks"])
        assert results.load_result(run.stdout).tier == want


@pytest.mark.slow
def test_stdout_is_one_line() -> None:
    run = kernels.run_kernel_raw("whereami", ["--spin-ms", "1"], env=omp_env(2))
    assert run.returncode == 0
    assert run.stdout.count("\n") == 1 and run.stdout.endswith("}\n")
    assert results.load_result(run.stdout).kernel == "whereami"


@pytest.mark.slow
def test_load_result_corrupt_and_truncated_files(small_dgemm_text: str, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(small_dgemm_text)
    assert results.load_result(good).kernel == "dgemm"
    cases = {
        "truncated.json": small_dgemm_text[: len(small_dgemm_text) // 2],
        "garbage.json": "\x00\x01not json at all",
        "empty.json": "",
    }
    for fname, text in cases.items():
        path = tmp_path / fname
        path.write_text(text)
        with pytest.raises(TopobindError) as err:
            results.load_result(path)
        msg = str(err.value)
        assert str(path) in msg and "\n" not in msg, msg
    with pytest.raises(TopobindError, match="cannot read"):
        results.load_result(tmp_path / "missing.json")
    with pytest.raises(TopobindError, match="corrupt or truncated"):
        results.load_result(small_dgemm_text[:-40])


@pytest.mark.slow
def test_load_result_rejects_schema_violations(small_dgemm_text: str) -> None:
    doc = json.loads(small_dgemm_text)
    bad = dict(doc)
    del bad["valid"]
    with pytest.raises(TopobindError, match="'valid' is a required property"):
        results.load_result(json.dumps(bad))
    bad = json.loads(small_dgemm_text)
    bad["headline"]["metric"] = "nope"
    with pytest.raises(TopobindError, match='"headline.metric" "nope" names no metric'):
        results.load_result(json.dumps(bad))
    bad = json.loads(small_dgemm_text)
    bad["headline"] = None  # dgemm must have a headline
    with pytest.raises(TopobindError, match="not a valid"):
        results.load_result(json.dumps(bad))
    bad = json.loads(small_dgemm_text)
    bad["metrics"]["gflops"]["trials"] = []
    with pytest.raises(TopobindError, match="metrics/gflops/trials"):
        results.load_result(json.dumps(bad))


@pytest.mark.slow
def test_load_results_json_lines(small_dgemm_text: str, tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    path.write_text(small_dgemm_text.strip() + "\n" + small_dgemm_text.strip() + "\n")
    assert [r.kernel for r in results.load_results(path)] == ["dgemm", "dgemm"]
    path.write_text(small_dgemm_text.strip() + "\n{broken\n")
    with pytest.raises(TopobindError, match=r"two\.jsonl:2: corrupt"):
        results.load_results(path)


@pytest.mark.slow
def test_find_kernel_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "stream"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("TOPOBIND_KERNELS_DIR", str(tmp_path))
    assert kernels.find_kernel("stream") == fake
    with pytest.raises(TopobindError, match="make kernels"):  # the explicit dir only
        kernels.find_kernel("dgemm")
    monkeypatch.delenv("TOPOBIND_KERNELS_DIR")
    assert kernels.find_kernel("dgemm") == REPO / "kernels" / "bin" / "dgemm"
    # the rank step is built apart from the kernels (rankstep/bin); an installation puts both
    # in one bin/ (TOPOBIND_KERNELS_DIR, above)
    assert kernels.find_kernel("rankexec") == REPO / "rankstep" / "bin" / "rankexec"
    assert kernels.find_kernel(kernels.HUGEPAGE_SHIM).parent == REPO / "rankstep" / "bin"
    with pytest.raises(TopobindError, match="make kernels"):
        kernels.find_kernel("no-such-kernel")


@pytest.mark.slow
def test_stream_rates_follow_stream_conventions() -> None:
    res = kernels.run_kernel(
        "stream", ["--elements", "10M", "--trials", "4", "--pages", "4k"], env=omp_env(2)
    )
    assert res.valid and "solution validates" in res.validation
    n = res.params["array_elements"]
    assert n == 10_000_000 and res.params["bytes_per_array"] == 8 * n
    for name, arrays in (("copy", 2), ("scale", 2), ("add", 3), ("triad", 3)):
        rates, times = res.metrics[name], res.metrics[f"{name}_time"]
        assert len(rates.trials) == 4 and rates.warmup == 1 and rates.unit == "MB/s"
        for r, t in zip(rates.trials, times.trials, strict=True):
            assert r == pytest.approx(1e-6 * arrays * 8 * n / t, rel=1e-9)
        assert rates.best == max(rates.trials[1:])
        assert times.best == min(times.trials[1:])
    assert res.headline is not None and res.headline.value == res.metrics["triad"].best
    assert res.threads == 2 and len(res.placement) == 2


@pytest.mark.slow
def test_stream_default_size_is_4x_llc() -> None:
    run = kernels.run_kernel_raw("stream", ["--help"])
    assert "4x the total last-level cache" in run.stdout
    llc = 0
    seen = set()
    for idx in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cache/index[0-9]*"):
        if (idx / "type").read_text().strip() == "Instruction":
            continue
        level = int((idx / "level").read_text())
        seen.add((level, (idx / "shared_cpu_list").read_text().strip(), (idx / "size").read_text()))
    top = max(level for level, _, _ in seen)
    for level, _, size in seen:
        if level == top:
            llc += int(size.strip()[:-1]) * 1024
    res = kernels.run_kernel("stream", ["--trials", "2", "--pages", "thp"], env=omp_env(2))
    assert res.params["llc_bytes_total"] == llc
    assert res.params["array_elements"] == max(10_000_000, math.ceil(4 * llc / 8))


@pytest.mark.slow
def test_dgemm_result_is_checked() -> None:
    res = kernels.run_kernel("dgemm", ["--n", "400", "--reps", "3"], env=omp_env(2))
    assert res.valid and res.params["max_rel_error"] < 1e-12
    g = res.metrics["gflops"]
    assert len(g.trials) == 3 and all(x > 0 for x in g.trials)
    assert res.headline is not None and res.headline.stat == "median"
    assert res.headline.value == sorted(g.trials)[1]
    assert res.params["blas_threads"] == 2
    for t, s in zip(g.trials, res.metrics["seconds"].trials, strict=True):
        assert t == pytest.approx(2 * 400**3 / s / 1e9, rel=1e-9)


@pytest.mark.slow
def test_latency_grows_with_working_set() -> None:
    res = kernels.run_kernel(
        "latency",
        ["--sizes", "16K,64M", "--trials", "2", "--min-time", "0.03", "--pages", "thp"],
    )
    assert res.valid
    l1, dram = res.metrics["latency_16K"].median, res.metrics["latency_64M"].median
    assert l1 is not None and dram is not None and 0 < l1 < dram
    assert res.headline is not None and res.headline.metric == "latency_64M"
    assert res.params["sizes_bytes"] == [16384, 64 << 20]


@pytest.mark.slow
def test_latency_numa_matrices() -> None:
    res = kernels.run_kernel(
        "latency",
        ["--sizes", "32M", "--trials", "1", "--min-time", "0.02", "--matrix", "--bw-matrix"]
        + ["--bw-size", "64M", "--cpu", "0", "--mem-node", "0", "--pages", "4k"],
    )
    nodes = sorted(
        int(p.name[4:]) for p in Path("/sys/devices/system/node").glob("node[0-9]*")
    ) or [0]
    for name, unit in (("latency", "ns"), ("read_bw", "MB/s")):
        m = res.matrices[name]
        assert m.row_kind == m.col_kind == "numa" and m.unit == unit
        assert list(m.cols) == nodes
        v = m.value(0, 0)
        assert v is not None and v > 0
    assert res.placement[0].cpu == 0 and res.placement[0].affinity == (0,)
    assert res.pages is not None and res.pages.extra["mem_node"] == 0


@pytest.mark.slow
def test_make_from_clean_has_no_warnings(tmp_path: Path) -> None:
    """Build a pristine copy of libtb/, kernels/ and rankstep/ (both link libtb, which the
    first builds) with the default flags: no warning may appear."""
    for folder in ("libtb", "kernels", "rankstep"):
        subprocess.run(["cp", "-r", str(REPO / folder), str(tmp_path / folder)], check=True)
        subprocess.run(["make", "-s", "-C", str(tmp_path / folder), "clean"], check=True)
    for folder, targets in (("kernels", []), ("rankstep", ["all", "spank-option"])):
        proc = subprocess.run(
            ["make", "-C", str(tmp_path / folder), f"-j{os.cpu_count() or 2}", *targets],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert "warning" not in (proc.stdout + proc.stderr).lower()
    for name in KERNELS:
        assert (tmp_path / "kernels" / "bin" / name).exists()
    for name in ("rankexec", "libtbhugepages.so", "tb-bigalloc", "tb-spank-option"):
        assert (tmp_path / "rankstep" / "bin" / name).exists()
    assert (tmp_path / "libtb" / "build" / "libtb.a").exists()


def _dgemm_bound(exe: Path, tmp: Path) -> tuple[dict, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "OMP_PLACES": "{0},{1}", "OMP_PROC_BIND": "close"}
    out = tmp / f"{exe.parent.name}.json"
    proc = subprocess.run(
        [str(exe), "--n", "256", "--reps", "2", "--pages", "4k", "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text()), proc.stderr


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 PUs")
def test_dgemm_runs_blas_on_the_bound_openmp_team_and_warns_about_pthreads(tmp_path: Path) -> None:
    # make setup installs Debian's OpenMP OpenBLAS; kernels/Makefile links it.
    doc, err = _dgemm_bound(KSRC / "bin" / "dgemm", tmp_path)
    assert doc["params"]["blas_parallel"] == "openmp"
    assert "openblas-openmp" in doc["params"]["blas_library"]
    assert doc["valid"] and "warning" not in err
    # The pthreads build (Debian's default libopenblas.so) under the same binding: its workers
    # inherit the main thread's one-PU mask, and dgemm says so.
    pt = tmp_path / "pthreads"
    proc = subprocess.run(
        ["make", "-s", "-C", str(KSRC), f"BIN={pt}", "BLAS_CFLAGS=",
         "BLAS_LIBS=-lopenblas", f"{pt}/dgemm"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc, err = _dgemm_bound(pt / "dgemm", tmp_path)
    assert doc["params"]["blas_parallel"] == "pthreads"
    assert (
        "dgemm: warning: pthreads OpenBLAS with 2 threads, but the main thread is bound to 1" in err
    )
