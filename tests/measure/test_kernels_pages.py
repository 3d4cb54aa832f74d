"""Kernels: page sizes really obtained (1G/2M hugetlb, THP, 4k), --strict, the LD_PRELOAD shim.

These change /sys/kernel/mm/hugepages/*/nr_hugepages through
topobind.measure.hugepages.reserve_hugepages (root only; restored afterwards) and skip with the
reason when that is impossible.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest_kernels import (
    KIB_1G,
    KIB_2M,
    omp_env,
    require_root,
    reserved,
    reserved_free,
    thp_mode,
)

from topobind.errors import TopobindError
from topobind.measure import hugepages
from topobind.measure import programs as kernels

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("built_kernels")]

STREAM_SMALL = ["--elements", "20M", "--trials", "5"]  # 3 x 160 MB = 458 MiB: one 1G page
DGEMM_SMALL = ["--n", "1024", "--reps", "3"]  # 3 x 8 MiB


def _strict_failure(name: str, args: list[str]) -> kernels.KernelError:
    with pytest.raises(kernels.KernelError) as err:
        kernels.run_kernel(name, args, env=omp_env(2))
    return err.value


def test_hugepages_status_matches_meminfo() -> None:
    status = hugepages.hugepages_status()
    meminfo = dict(
        line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line
    )
    default_kib = int(meminfo["Hugepagesize"].split()[0])
    assert default_kib in status
    pool = status[default_kib]
    assert pool.nr == int(meminfo["HugePages_Total"])
    assert pool.free == int(meminfo["HugePages_Free"])
    if pool.nodes:
        assert sum(n.nr for n in pool.nodes.values()) == pool.nr


def test_reserve_hugepages_sets_and_restores() -> None:
    before = hugepages.hugepages_status()[KIB_1G].nr
    with reserved(KIB_1G, 1) as st:
        assert st.nr == 1 and hugepages.hugepages_status()[KIB_1G].nr == 1
    assert hugepages.hugepages_status()[KIB_1G].nr == before


def test_reserve_hugepages_needs_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with (
        pytest.raises(TopobindError, match="needs root; as root run: echo 2 >"),
        hugepages.reserve_hugepages(KIB_1G, 2),
    ):
        pass
    with (
        pytest.raises(TopobindError, match="no 4 kB hugepage pool"),
        hugepages.reserve_hugepages(4, 1),
    ):
        pass


def test_1g_pages_strict() -> None:
    with reserved_free(KIB_1G, 2):
        s = kernels.run_kernel(
            "stream", [*STREAM_SMALL, "--pages", "1G", "--strict"], env=omp_env(2)
        )
        d = kernels.run_kernel("dgemm", [*DGEMM_SMALL, "--pages", "1G", "--strict"], env=omp_env(2))
    for res in (s, d):
        assert res.valid, res.validation
        assert res.pages is not None
        assert res.pages.kib == KIB_1G and res.pages.method == "hugetlb-1G"
        assert res.pages.fallback is False and res.pages.requested == "1G"
        assert res.pages.extra["bytes"] % (1 << 30) == 0


def test_1g_pages_absent_strict_fails_auto_falls_back() -> None:
    with reserved(KIB_1G, 0), reserved(KIB_2M, 0):
        err = _strict_failure("stream", [*STREAM_SMALL, "--pages", "1G", "--strict"])
        assert err.returncode == kernels.EXIT_PAGES
        lines = err.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("stream: error: requested 1G pages but got none")
        # the pool is the machine's: pages another process holds raise the count to ask for
        asked = re.search(r"echo (\d+) > /sys/kernel/mm/hugepages/hugepages-1048576kB/"
                          r"nr_hugepages$", lines[0])  # fmt: skip
        assert asked and int(asked[1]) >= 1, lines[0]
        err = _strict_failure("dgemm", [*DGEMM_SMALL, "--pages", "1G", "--strict"])
        assert err.returncode == kernels.EXIT_PAGES and "requested 1G pages" in err.stderr
        res = kernels.run_kernel("stream", [*STREAM_SMALL, "--pages", "auto"], env=omp_env(2))
    assert res.valid and res.pages is not None
    assert res.pages.requested == "auto" and res.pages.fallback is True
    assert res.pages.kib != KIB_1G and res.pages.method in ("thp", "4k")
    assert "1G: mmap(MAP_HUGETLB|MAP_HUGE_1GB)" in res.pages.note
    assert "2M: mmap(MAP_HUGETLB|MAP_HUGE_2MB)" in res.pages.note


def test_2m_pages_strict_and_fallback() -> None:
    with reserved_free(KIB_2M, 300):  # stream needs 229, dgemm 12
        s = kernels.run_kernel(
            "stream", [*STREAM_SMALL, "--pages", "2M", "--strict"], env=omp_env(2)
        )
        d = kernels.run_kernel("dgemm", [*DGEMM_SMALL, "--pages", "2M", "--strict"], env=omp_env(2))
    for res in (s, d):
        assert res.valid and res.pages is not None
        assert res.pages.kib == KIB_2M and res.pages.method == "hugetlb-2M"
        assert not res.pages.fallback
    with reserved(KIB_2M, 0):
        err = _strict_failure("stream", [*STREAM_SMALL, "--pages", "2M", "--strict"])
        assert err.returncode == kernels.EXIT_PAGES
        assert "hugepages-2048kB/nr_hugepages" in err.stderr
        res = kernels.run_kernel("dgemm", [*DGEMM_SMALL, "--pages", "2M"], env=omp_env(2))
    assert res.pages is not None and res.pages.fallback
    assert res.pages.method in ("thp", "4k") and res.pages.note.startswith("2M: ")


def test_thp_and_4k() -> None:
    mode = thp_mode()
    args = [*STREAM_SMALL, "--pages", "thp", "--strict"]
    if mode == "never":
        err = _strict_failure("stream", args)
        assert err.returncode == kernels.EXIT_PAGES and "THP is disabled" in err.stderr
    else:
        res = kernels.run_kernel("stream", args, env=omp_env(2))
        assert res.pages is not None and res.pages.kib == KIB_2M and res.pages.method == "thp"
        assert res.pages.extra["anon_huge_kib"] > 0 and not res.pages.fallback
    res = kernels.run_kernel("stream", [*STREAM_SMALL, "--pages", "4k", "--strict"], env=omp_env(2))
    assert res.pages is not None and res.pages.kib == 4 and res.pages.method == "4k"
    assert res.pages.extra["anon_huge_kib"] == 0


def test_latency_1g_working_set_4k_vs_1g_pages() -> None:
    args = ["--sizes", "1G", "--trials", "2", "--min-time", "0.05", "--cpu", "0"]
    with reserved_free(KIB_1G, 2):
        huge = kernels.run_kernel("latency", [*args, "--pages", "1G", "--strict"])
    small = kernels.run_kernel("latency", [*args, "--pages", "4k", "--strict"])
    for res, kib in ((huge, KIB_1G), (small, 4)):
        assert res.valid and res.pages is not None and res.pages.kib == kib
        assert res.headline is not None and res.headline.metric == "latency_1G"
        assert res.headline.value > 0


def _bigalloc(mib: str, report: Path, extra_env: dict[str, str] | None = None) -> tuple[dict, str]:
    env = {
        "LD_PRELOAD": str(kernels.find_kernel(kernels.HUGEPAGE_SHIM)),
        "TOPOBIND_HUGE_REPORT": str(report),
        "TOPOBIND_HUGE_VERBOSE": "1",
        **(extra_env or {}),
    }
    run = kernels.run_kernel_raw("tb-bigalloc", [mib], env=env)
    assert run.returncode == 0, run.stderr
    return json.loads(report.read_text()), run.stderr


def test_preload_shim_serves_1g_pages(tmp_path: Path) -> None:
    require_root()
    with reserved_free(KIB_1G, 2):
        rep, err = _bigalloc("1536", tmp_path / "r.json")
        assert rep["huge_allocations"] == 1 and rep["bytes"] == 1536 << 20
        assert rep["page_kib"] == KIB_1G and rep["fallbacks"] == 0 and err == ""
        assert rep["mapped_bytes"] == 2 << 30 and rep["live_at_exit"] == 0
        small, _ = _bigalloc("16", tmp_path / "small.json")  # below TOPOBIND_HUGE_MIN
        assert small["huge_allocations"] == 0 and small["page_kib"] is None
        low, _ = _bigalloc("16", tmp_path / "low.json", {"TOPOBIND_HUGE_MIN": "8M"})
        assert low["huge_allocations"] == 1 and low["page_kib"] == KIB_1G
    with reserved(KIB_1G, 0), reserved(KIB_2M, 0):
        rep, err = _bigalloc("100", tmp_path / "fb.json")
    assert rep["huge_allocations"] == 1 and rep["page_kib"] == 4 and rep["fallbacks"] == 1
    assert err.count("\n") == 1 and "1G pages refused" in err and "fell back to mmap-4k" in err
