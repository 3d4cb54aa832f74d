"""`topobind draw`: layout pictures (PNG and text) agree with the plan they draw."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import Cli, run_topobind
from paths import TOPOLOGIES
from plans import plan_of

from topobind.draw.boxes import core_uses, rank_colour, rank_style
from topobind.draw.boxes import text_tree as draw_text
from topobind.draw.png import _legend_label, draw_png
from topobind.topo.topology import format_list, load

EPYC = "synthetic:pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)"


def test_core_uses_follow_the_plan_smt() -> None:
    topo = load("synthetic:pack:1 numa:1 l3:2 core:4 pu:2")
    plan = plan_of(topo, "compact", ranks=2, threads=3, smt=True)
    uses = {u.core.logical: u for u in core_uses(plan)}
    # 2-way SMT: rank 0 threads 0,1 share core 0; thread 2 and rank 1's thread 0 share core 1
    assert uses[0].owners == ((0, 0), (0, 1)) and uses[0].label() == "r0:0,1"
    assert uses[1].label() == "r0:2/r1:0"
    assert uses[2].label() == "r1:1,2"
    assert [uses[i].label() for i in range(3, 8)] == ["-"] * 5


def test_text_lists_every_thread_on_its_core() -> None:
    plan = plan_of(load(EPYC), "every-other-core", ranks=4)
    text = draw_text(plan)
    found = re.findall(r"L#(\d+) \(PU ([\d,-]+)\) (r\d+:\d+|-)", text)
    cells = {core: who for core, _, who in found}
    assert len(cells) == 128  # every core drawn once
    # every core shows the OS indexes of its PUs, SMT siblings included (PU n and n + 128)
    assert {core: pus for core, pus, _ in found} == {
        str(c.logical): f"{c.pus[0]},{c.pus[1]}" for c in plan.topology.cores
    }
    expected = {}
    pu_core = plan.topology.pu_to_core()
    for r in plan.ranks:
        for t, place in enumerate(r.places):
            expected[str(pu_core[place[0]].logical)] = f"r{r.rank}:{t}"
    assert {k: v for k, v in cells.items() if v != "-"} == expected
    assert text.count("+ package L#") == 2 and text.count("+ NUMA node") == 8
    assert text.count("+ L3 L#") == 32
    assert "\x1b[" not in text and "\x1b[" in draw_text(plan, colour=True)


@pytest.mark.slow
def test_png_paints_each_rank_on_its_cores() -> None:
    """Count pixels of each rank's colour: proportional to that rank's number of cores."""
    plan = plan_of(load(EPYC), "per-numa", ranks=8, threads=4)
    png = draw_png(plan)
    import matplotlib.image

    img = (matplotlib.image.imread(io.BytesIO(png))[..., :3] * 255).round().astype(int)
    counts = []
    for r in plan.ranks:
        rgb = [int(rank_colour(r.rank)[i : i + 2], 16) for i in (1, 3, 5)]
        counts.append(int((np.abs(img - rgb).sum(axis=2) <= 6).sum()))
    # legend swatches add a little; the bulk is one filled box per core
    per_core = [c / len(r.cores) for c, r in zip(counts, plan.ranks, strict=True)]
    assert min(per_core) > 200, per_core
    assert max(per_core) / min(per_core) < 1.3, per_core


@pytest.mark.slow
@pytest.mark.parametrize("xml", sorted(TOPOLOGIES.glob("*.xml"))[:6], ids=lambda p: p.stem)
def test_draws_real_machines(xml: Path) -> None:
    topo = load(str(xml))
    plan = plan_of(topo, "compact")
    text = draw_text(plan)
    assert text.count("L#") >= len(topo.cores)
    png = draw_png(plan)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


@pytest.mark.slow
def test_cli(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_topobind("draw", "-t", EPYC, *args, timeout=120)

    out = tmp_path / "eoc.png"
    proc = run("--layout", "every-other-core", "--ranks", "4", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    proc = run("--layout", "per-l3", "--format", "text")
    assert proc.returncode == 0 and "r31:3" in proc.stdout and "\x1b[" not in proc.stdout
    proc = run("--layout", "per-l3", "--format", "png")
    assert proc.returncode == 2 and "needs -o" in proc.stderr
    proc = run("--layout", "no-such-layout", "-o", str(tmp_path / "x.png"))
    assert proc.returncode == 2 and not (tmp_path / "x.png").exists()


@pytest.mark.slow
def test_every_rank_looks_different() -> None:
    """Colours repeat after 20 ranks; the hatching (then the border) differs, so rank r and
    r + 20 are never painted alike, up to 520 ranks."""
    styles = [rank_style(r) for r in range(520)]
    assert len(set(styles)) == 520
    assert rank_style(0).colour == rank_style(20).colour and rank_style(0) != rank_style(20)
    assert rank_style(0).hatch == "" and rank_style(20).hatch != ""
    # in the picture: rank 20's core is hatched, so rank 0's colour covers clearly less than
    # two plain cores (ranks 0 and 20), while rank 1's colour covers one plain core
    plan = plan_of(load(EPYC), "compact", ranks=21, threads=1)
    png = draw_png(plan)
    import matplotlib.image

    img = (matplotlib.image.imread(io.BytesIO(png))[..., :3] * 255).round().astype(int)

    def pixels(colour: str) -> int:
        rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
        return int((np.abs(img - rgb).sum(axis=2) <= 6).sum())

    one_core = pixels(rank_colour(1))
    assert one_core > 200
    assert 1.15 * one_core < pixels(rank_colour(0)) < 1.85 * one_core


def test_legend_lists_cores_like_the_text_output() -> None:
    """spread --smt puts rank 0 on cores L#0,2,4,6: the legend says so (not "L#0-6")."""
    plan = plan_of(load("synthetic:pack:1 numa:2 l3:2 core:4 pu:2"), "spread", 2, 4, smt=True)
    assert plan.ranks[0].cores == (0, 2, 4, 6)
    label = _legend_label(plan.ranks[0], 200)
    assert label == "rank 0: 4 threads on cores L#0,2,4,6 (PUs 0,4,8,12); NUMA 0"
    assert "core L#0,2,4,6;" in draw_text(plan)  # the same list in the text output
    # a long list wraps after a comma, never inside a number
    eoc = plan_of(load(EPYC), "every-other-core", ranks=4)
    wrapped = _legend_label(eoc.ranks[3], 50)
    lines = wrapped.split("\n")
    assert len(lines) > 1 and all(len(line) <= 50 for line in lines)
    assert not any(line[-1].isdigit() for line in lines[:-1])  # no number cut in two
    assert re.sub(r"\s", "", wrapped) == re.sub(
        r"\s",
        "",
        "rank 3: 16 threads on cores L#96,98,100,102,104,106,108,110,112,114,116,118,120,122,"
        "124,126 (PUs 96,98,100,102,104,106,108,110,112,114,116,118,120,122,124,126); NUMA 6-7",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "extra", "needle"),
    [
        ("x.svg", [], "extension '.svg'"),
        ("x.jpg", [], "extension '.jpg'"),
        ("x", [], "no extension"),
        ("x.txt", ["--format", "png"], "does not match"),
        ("x.png", ["--format", "text"], "does not match"),
    ],
)
def test_cli_refuses_unknown_output_types(
    tmp_path: Path, name: str, extra: list[str], needle: str, topobind_cli: Cli
) -> None:
    out = tmp_path / name
    proc = topobind_cli("draw", "-t", EPYC, "-l", "per-l3", "-o", str(out), *extra, timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topobind: error: ") and needle in lines[0]
    assert ".png" in lines[0] and ".txt" in lines[0]
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_cli_writes_text_and_png_by_extension(tmp_path: Path, topobind_cli: Cli) -> None:
    for name in ("plan.txt", "PLAN.PNG"):
        proc = topobind_cli(
            "draw", "-t", EPYC, "-l", "per-numa", "-o", str(tmp_path / name), timeout=120
        )
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "plan.txt").read_text().startswith("layout per-numa: 8 ranks x 16 threads")
    assert (tmp_path / "PLAN.PNG").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_hatch_ink_without_hatchcolor() -> None:
    """matplotlib < 3.11 has no hatchcolor: the hatch takes the edge colour there (drawn for
    real with matplotlib 3.6.3 when this was written; CI has one matplotlib)."""
    from topobind.draw.png import _hatch_ink

    assert _hatch_ink("#fff", "#555", hatchcolor=True) == {"hatchcolor": "#fff", "ec": "#555"}
    assert _hatch_ink("#fff", None, hatchcolor=True) == {"hatchcolor": "#fff"}
    assert _hatch_ink("#fff", None, hatchcolor=False) == {"ec": "#fff"}
    assert _hatch_ink("#fff", "#555", hatchcolor=False) == {"ec": "#555"}


def test_text_grid_names_the_pus_of_every_numa_line() -> None:
    """`topobind plan --format picture`: one cell per core and, per NUMA node, the OS indexes
    of its PUs, SMT siblings included, as the topology has them."""
    from topobind.draw.boxes import text_grid

    plan = plan_of(load(EPYC), "compact", ranks=8, threads=4)
    lines = text_grid(plan).splitlines()
    rows = [line for line in lines if line.startswith("  NUMA ")]
    assert len(rows) == 8
    for node, row in zip(plan.topology.numa_nodes, rows, strict=True):
        cells = re.findall(r"\[([^\]]*)\]", row)
        assert sum(len(c.split()) for c in cells) == 16  # 16 cores per NUMA node
        pus = row.split("  PUs ")[1]
        assert pus == format_list(node.pus), (row, node)
    assert rows[0].startswith("  NUMA 0  [0 0 0 0][1 1 1 1]")
    assert rows[0].endswith("PUs 0-15,128-143")
