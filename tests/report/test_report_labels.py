"""Axis labels of the report's pictures say what is on them: NUMA matrices tell the node the
threads run on from the node the memory is on; a latency working set is not a page size."""

from __future__ import annotations

from typing import Any

import pytest
from fleetgen import FleetSpec, generate_fleet

from topobind.report.analysis import Options, Report, analyse, metric_label
from topobind.report.charts import ecdf_picture, hosts_picture, matrix_picture, pages_picture
from topobind.report.reader import read_results


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    root = tmp_path_factory.mktemp("labels")
    spec = FleetSpec(hosts=6, runs=3, kernels=("latency", "c2c"), pages=("4k", "2M"))
    generate_fleet(root / "fleet", spec)
    read = read_results([root / "fleet"])
    return analyse(read.runs, Options(), read.inputs, read.files)


@pytest.fixture
def labels(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Every x/y axis label set while a picture is drawn (in this process)."""
    from matplotlib.axes import Axes

    seen: dict[str, list[str]] = {"x": [], "y": []}
    for axis in ("x", "y"):
        original = getattr(Axes, f"set_{axis}label")

        def record(
            self: Any, text: str, *a: Any, _o: Any = original, _k: str = axis, **kw: Any
        ) -> Any:
            seen[_k].append(str(text))
            return _o(self, text, *a, **kw)

        monkeypatch.setattr(Axes, f"set_{axis}label", record)
    return seen


def test_metric_label_names_the_working_set() -> None:
    assert metric_label("latency", "latency_1GiB") == "memory latency at 1 GiB working set"
    assert metric_label("latency", "latency_256M") == "memory latency at 256 MiB working set"
    assert metric_label("latency", "latency_16K") == "memory latency at 16 KiB working set"
    assert metric_label("stream", "triad") == "stream triad"


@pytest.mark.slow
def test_numa_heatmap_axes_say_threads_and_memory(
    report: Report, labels: dict[str, list[str]]
) -> None:
    numa = [m for m in report.matrices if m.row_kind == "numa" and m.page_kib == 2048]
    assert {m.name for m in numa} == {"numa_latency", "numa_bandwidth"}
    for m in numa:
        labels["x"].clear()
        labels["y"].clear()
        pic = matrix_picture(report, m)
        # two panels (fleet, slowest host), both labelled so; the colour bar has the unit
        assert [t for t in labels["y"] if "NUMA" in t] == ["threads on NUMA node (OS index)"] * 2
        assert [t for t in labels["x"] if "NUMA" in t] == ["memory on NUMA node (OS index)"] * 2
        assert "Row = threads on NUMA node (OS index), column = memory on NUMA node" in pic.caption
    (c2c,) = [m for m in report.matrices if m.row_kind == "cpu" and m.page_kib == 2048]
    labels["x"].clear()
    labels["y"].clear()
    matrix_picture(report, c2c)
    assert [t for t in labels["x"] + labels["y"] if "index" in t] == ["CPU (PU, OS index)"] * 4


@pytest.mark.slow
def test_latency_pictures_call_1gib_a_working_set(
    report: Report, labels: dict[str, list[str]]
) -> None:
    (g,) = [g for g in report.groups if g.kernel == "latency" and g.page_kib == 2048]
    ecdf_picture(report, g)
    hosts_picture(report, g)
    (pc,) = [p for p in report.pages if p.kernel == "latency"]
    pages_picture(report, pc)
    ecdf_x = labels["x"][0]
    assert ecdf_x.startswith("memory latency at 1 GiB working set (median of trials) [ns]")
    assert "latency_1GiB" not in " ".join(labels["x"] + labels["y"])
    hosts_y, pages_y = labels["y"][-2:]
    assert hosts_y.startswith("memory latency at 1 GiB working set [ns]")
    assert pages_y.startswith("memory latency at 1 GiB working set [ns],")
    assert labels["x"][-1] == "page size backing the kernel's memory (pages.kib)"
