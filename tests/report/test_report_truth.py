"""The report's pictures tell the truth (issue 11 item 7): no slow threshold for one host, no
"worse" colour on a heatmap of one value, page-size fallbacks named, titles without doubled
words or empty fields."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fleetgen import FleetSpec, generate_fleet

from topobind.report.analysis import Options, Report, analyse
from topobind.report.build import build_report
from topobind.report.charts import (
    FLAT_COLOUR,
    SLOW_COLOUR,
    ecdf_picture,
    hosts_picture,
    matrix_picture,
    pages_picture,
)
from topobind.report.reader import read_results


def _rewrite(root: Path, change: Any) -> None:
    for path in sorted(root.rglob("*.json")):
        doc = json.loads(path.read_text())
        change(doc)
        path.write_text(json.dumps(doc))


def _analyse(root: Path) -> Report:
    read = read_results([root])
    return analyse(read.runs, Options(), read.inputs, read.files)


@pytest.fixture
def texts(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Titles and horizontal lines drawn while pictures are made (in this process)."""
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    seen: dict[str, list[Any]] = {"titles": [], "hlines": [], "cmaps": []}
    set_title, suptitle, axhline, imshow = (
        Axes.set_title,
        Figure.suptitle,
        Axes.axhline,
        Axes.imshow,
    )

    def title(self: Any, text: str, *a: Any, **kw: Any) -> Any:
        seen["titles"].append(str(text))
        return set_title(self, text, *a, **kw)

    def sup(self: Any, text: str, *a: Any, **kw: Any) -> Any:
        seen["titles"].append(str(text))
        return suptitle(self, text, *a, **kw)

    def hline(self: Any, *a: Any, **kw: Any) -> Any:
        seen["hlines"].append(kw.get("color"))
        return axhline(self, *a, **kw)

    def show(self: Any, *a: Any, **kw: Any) -> Any:
        seen["cmaps"].append(kw.get("cmap"))
        return imshow(self, *a, **kw)

    monkeypatch.setattr(Axes, "set_title", title)
    monkeypatch.setattr(Figure, "suptitle", sup)
    monkeypatch.setattr(Axes, "axhline", hline)
    monkeypatch.setattr(Axes, "imshow", show)
    return seen


@pytest.mark.slow
def test_one_host_has_no_slow_threshold(tmp_path: Path, texts: dict[str, list[Any]]) -> None:
    generate_fleet(tmp_path / "one", FleetSpec(hosts=1, runs=3, kernels=("stream",)))
    report = _analyse(tmp_path / "one")
    (g,) = report.groups
    assert g.threshold is None and not g.slow_hosts
    pic = hosts_picture(report, g)
    assert SLOW_COLOUR not in texts["hlines"]  # no red threshold line
    assert "no slow threshold" in pic.caption
    built = build_report([str(tmp_path / "one")], tmp_path / "r1", Options())
    assert (
        json.loads((tmp_path / "r1" / "report.json").read_text())["groups"][0]["slow_threshold"]
        is None
        and built.report.groups[0].threshold is None
    )
    # two hosts: a fleet, so a threshold line
    generate_fleet(tmp_path / "two", FleetSpec(hosts=2, runs=3, kernels=("stream",)))
    report = _analyse(tmp_path / "two")
    assert report.groups[0].threshold is not None
    texts["hlines"].clear()
    hosts_picture(report, report.groups[0])
    assert SLOW_COLOUR in texts["hlines"]


def _two_cpu_c2c(doc: dict[str, Any], value: float | None = 130.0) -> None:
    if doc["kernel"] == "c2c":
        doc["matrices"] = {
            "c2c": {
                "unit": "ns",
                "rows": [0, 1],
                "cols": [0, 1],
                "row_kind": "cpu",
                "col_kind": "cpu",
                "values": [[None, value], [value, None]],
            }
        }


@pytest.mark.slow
def test_heatmap_of_one_value_is_not_coloured_worse(
    tmp_path: Path, texts: dict[str, list[Any]]
) -> None:
    generate_fleet(tmp_path / "f", FleetSpec(hosts=1, runs=3, kernels=("c2c",)))
    _rewrite(tmp_path / "f", _two_cpu_c2c)
    report = _analyse(tmp_path / "f")
    (m,) = report.matrices
    pic = matrix_picture(report, m)
    (cmap,) = texts["cmaps"]
    assert cmap.N == 1  # one colour: no scale from better to worse
    import matplotlib.image

    img = (matplotlib.image.imread(io.BytesIO(pic.png))[..., :3] * 255).round().astype(int)
    flat = [int(FLAT_COLOUR[i : i + 2], 16) for i in (1, 3, 5)]
    assert int((np.abs(img - flat).sum(axis=2) <= 6).sum()) > 2000
    red = np.array([0xBD, 0x00, 0x26])  # the "worse" end of YlOrRd
    assert int((np.abs(img - red).sum(axis=2) <= 40).sum()) == 0
    # the title does not say the kernel twice ("c2c c2c [ns]")
    assert texts["titles"][-1].startswith("c2c [ns]") and pic.title.startswith("c2c [ns]")


@pytest.mark.slow
def test_thp_fallback_from_1g_is_labelled_as_such(tmp_path: Path) -> None:
    generate_fleet(tmp_path / "f", FleetSpec(hosts=3, runs=2, kernels=("stream",)))

    def fell_back(doc: dict[str, Any]) -> None:
        if doc["host"] == "gen-node0001":
            doc["pages"] |= {"requested": "1G", "kib": 2048, "fallback": True, "method": "thp"}

    _rewrite(tmp_path / "f", fell_back)
    report = _analyse(tmp_path / "f")
    by_pages = {g.pages: g for g in report.groups}
    assert set(by_pages) == {"2 MiB", "2 MiB (THP fallback from 1G)"}
    fallback = by_pages["2 MiB (THP fallback from 1G)"]
    assert [h.host for h in fallback.hosts] == ["gen-node0001"]
    for pic in (hosts_picture(report, fallback), ecdf_picture(report, fallback)):
        assert "2 MiB pages, THP fallback from 1G" in pic.title
        assert "THP_fallback_from_1G" in pic.filename
    built = build_report([str(tmp_path / "f")], tmp_path / "r", Options())
    assert "(2 MiB pages, THP fallback from 1G)" in built.text


@pytest.mark.slow
def test_titles_have_no_doubled_words_or_empty_fields(
    tmp_path: Path, texts: dict[str, list[Any]]
) -> None:
    spec = FleetSpec(hosts=4, runs=2, kernels=("stream", "latency", "c2c"), pages=("4k", "2M"))
    generate_fleet(tmp_path / "f", spec)
    _rewrite(tmp_path / "f", _two_cpu_c2c)
    report = _analyse(tmp_path / "f")
    pics = [hosts_picture(report, g) for g in report.groups]
    pics += [ecdf_picture(report, g) for g in report.groups]
    pics += [pages_picture(report, pc) for pc in report.pages]
    pics += [matrix_picture(report, m) for m in report.matrices]
    built = build_report([str(tmp_path / "f")], tmp_path / "r", Options())
    titles = texts["titles"] + [p.title for p in pics]
    titles += [line for line in built.text.splitlines() if line.startswith(("PER HOST", "  c2c"))]
    assert len(titles) > 20
    for title in titles:
        assert not re.search(r"\b(\w+) \1\b", title), title  # "c2c c2c"
        assert "layout -" not in title and "n/a" not in title and "()" not in title, title
