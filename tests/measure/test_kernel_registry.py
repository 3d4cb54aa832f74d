"""The kernel registry against everything that lists kernels: the Makefile, ``topobind bench``,
the checks catalogue, the docs' headline table and what the built kernels write; and adding a
kernel is one row plus its C file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest_kernels import omp_env
from paths import REPO
from plans import plan_of

from topobind.bench import runs as bench
from topobind.cli.commands import bench as bench_cmd
from topobind.errors import TopobindError
from topobind.measure import programs as kernels
from topobind.measure import registry as kernel_registry
from topobind.measure import results
from topobind.topo.topology import load_live
from topobind.validation.sites.catalogue import CHECKS

NAMES = [k.name for k in kernel_registry.KERNELS]
LOCAL = [k.name for k in kernel_registry.local_kernels()]


def _make_kernels(kdir: Path) -> list[str]:
    proc = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(kdir), "print-kernels"],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.split()


@pytest.mark.slow
def test_makefile_builds_exactly_the_local_kernels() -> None:
    assert sorted(_make_kernels(REPO / "kernels")) == sorted(LOCAL)
    c_files = {p.stem for p in (REPO / "kernels").glob("*.c")}
    assert c_files == set(LOCAL)  # the rank step's C files are in rankstep/


def test_bench_command_offers_every_row() -> None:
    parser = bench_cmd.inner_parser()
    for name in NAMES:
        assert parser.parse_args([name]).kernel == name
    with pytest.raises(SystemExit):
        parser.parse_args(["nosuchkernel"])
    with pytest.raises(TopobindError, match="choose one of stream, dgemm, latency, c2c, whereami"):
        bench.run_repeats("hpl", plan_of(load_live(), "compact"))


def test_catalogue_checks_run_registered_kernels() -> None:
    used = {c: k.name for k in kernel_registry.KERNELS for c in k.checks}
    assert set(used) == set(CHECKS)
    for check, kernel in used.items():  # the check and its kernel: one family, one name
        assert check == kernel, (check, kernel)


def test_docs_headline_table_matches_the_registry() -> None:
    text = (REPO / "docs" / "results-format.md").read_text()
    table = text.split("| kernel | headline |", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| (\w+) \| (.+?) \|$", table, re.M))
    assert sorted(rows) == sorted(NAMES)
    for k in kernel_registry.KERNELS:
        if k.headline is None:
            assert rows[k.name] == "null"
        else:
            metric, stat = k.headline.split()
            shown = re.findall(r"`([^`]+)`", rows[k.name])
            assert shown[0].replace("<largest size>", "*") == metric
            assert stat in rows[k.name] or k.name == "hpl"  # hpl: a single trial


@pytest.mark.slow
@pytest.mark.parametrize("name", LOCAL)
@pytest.mark.usefixtures("built_kernels")
def test_built_kernel_writes_the_registered_metrics(name: str, tmp_path: Path) -> None:
    spec = kernel_registry.find(name)
    assert spec is not None
    run = kernels.run_kernel_raw(name, [*spec.quick_args, "--json", str(tmp_path / "r.json")])
    if run.returncode != 0 and name == "c2c" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("c2c needs two PUs")
    assert run.returncode == 0, run.stderr
    res = results.load_result(tmp_path / "r.json")
    assert res.kernel == name
    for metric in res.metrics:
        assert any(kernel_registry.metric_matches(p, metric) for p in spec.metrics), metric
    for pattern in spec.metrics:
        assert any(kernel_registry.metric_matches(pattern, m) for m in res.metrics), pattern
    if spec.headline is None:
        assert res.headline is None
    else:
        metric, stat = spec.headline.split()
        assert res.headline is not None and res.headline.stat == stat
        assert kernel_registry.metric_matches(metric, res.headline.metric)
    assert set(res.matrices) <= set(spec.matrices)


@pytest.mark.slow
def test_a_new_kernel_is_one_row_plus_its_c_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Copy kernels/ (and libtb/ beside it), add toy.c (a kernel on libtb), add one registry
    row: the Makefile builds it and `topobind bench` runs it and saves its result."""
    kdir = tmp_path / "kernels"
    for folder in ("kernels", "libtb"):
        shutil.copytree(
            REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("bin", "build")
        )
    source = (kdir / "whereami.c").read_text().replace('"whereami"', '"toy"')
    (kdir / "toy.c").write_text(source)
    assert "toy" in _make_kernels(kdir)
    proc = subprocess.run(
        ["make", "-s", "-C", str(kdir), "bin/toy"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and "warning" not in proc.stderr.lower(), proc.stderr
    row = kernel_registry.Kernel(
        "toy", "a toy kernel", local=True, big_buffer=False, pins_own_threads=False,
        metrics=(), headline=None,
    )  # fmt: skip
    monkeypatch.setattr(kernel_registry, "KERNELS", (*kernel_registry.KERNELS, row))
    monkeypatch.setenv("TOPOBIND_KERNELS_DIR", str(kdir / "bin"))
    monkeypatch.setenv("OMP_NUM_THREADS", omp_env(1)["OMP_NUM_THREADS"])
    assert bench_cmd.inner_parser().parse_args(["toy"]).kernel == "toy"
    plan = plan_of(load_live(), "compact", ranks=1, threads=1)
    (run,) = bench.run_repeats("toy", plan, results_root=tmp_path / "res")
    assert run.result.kernel == "toy" and run.path.parent.name == "toy" and run.result.valid


def test_published_schema_names_the_registered_kernels() -> None:
    enum = results.schema_file()["properties"]["kernel"]["enum"]
    assert sorted(enum) == sorted(NAMES)
