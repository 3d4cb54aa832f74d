"""The per-host picture of a fleet of 5,000 hosts stays readable: the distribution of the host
medians in a picture whose size does not grow with the hosts, the slow hosts named in it
(issue 39 item 7), not 5,000 columns of dots in 1,600 pixels."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from fleetgen import FleetSpec, generate_fleet, parse_slow

from topobind.report import charts
from topobind.report.analysis import Options, Report, analyse
from topobind.report.reader import read_results

PLANTED = "gen-node0007:1.30,gen-node4242:1.25"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Report:
    root = tmp_path_factory.mktemp("big-fleet")
    spec = FleetSpec(hosts=5000, runs=3, kernels=("stream",), slow=parse_slow(PLANTED))
    generate_fleet(root / "fleet", spec)
    read = read_results([root / "fleet"])
    return analyse(read.runs, Options(), read.inputs, read.files)


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def _drawn_text(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text of each figure as it is saved (titles, labels, legend, boxes)."""
    from matplotlib.text import Text

    seen: list[str] = []
    original = charts._png

    def record(fig: Any) -> bytes:
        seen.extend(t.get_text() for t in fig.findobj(Text))
        return original(fig)

    monkeypatch.setattr(charts, "_png", record)
    return seen


@pytest.mark.slow
def test_hosts_picture_of_5000_hosts_is_bounded_and_names_the_outliers(
    big: Report, monkeypatch: pytest.MonkeyPatch
) -> None:
    (g,) = big.groups
    assert len(g.hosts) == 5000
    slow = [h.host for h in g.slow_hosts]
    assert {"gen-node0007", "gen-node4242"} <= set(slow)
    text = _drawn_text(monkeypatch)
    pic = charts.hosts_picture(big, g)
    width, height = _png_size(pic.png)
    assert width <= 1300 and height <= 700, (width, height)
    assert len(pic.png) < 400_000
    drawn = "\n".join(text)
    # the x axis carries the figure's values (host medians), not 5,000 host positions
    assert "host median of stream triad [MB/s]" in drawn
    assert "hosts sorted by median" not in drawn
    assert "5,000 hosts x 3 runs" in drawn
    # the two planted hosts are the worst two and are named, first, with their distance
    named = [line.split()[0] for line in drawn.splitlines() if line.startswith("gen-node")]
    assert named[:2] == ["gen-node0007", "gen-node4242"]
    assert set(named) <= set(slow)
    assert f"+{len(slow) - charts.MAX_NAMED_SLOW} more (tables)" in drawn or len(slow) <= 15
    assert "5000 hosts, too many for a column each" in pic.caption


@pytest.mark.slow
def test_hosts_picture_keeps_a_column_a_host_up_to_the_bound(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = FleetSpec(hosts=charts.MAX_HOST_COLUMNS, runs=2, kernels=("stream",))
    generate_fleet(tmp_path / "fleet", spec)
    read = read_results([tmp_path / "fleet"])
    report = analyse(read.runs, Options(), read.inputs, read.files)
    text = _drawn_text(monkeypatch)
    charts.hosts_picture(report, report.groups[0])
    assert f"{charts.MAX_HOST_COLUMNS} hosts sorted by median, worst at the right" in "\n".join(
        text
    )
