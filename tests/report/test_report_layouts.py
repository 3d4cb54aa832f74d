"""The report draws every layout of its results where the threads really ran (placement).

Generated fleets (tests/fleetgen.py, marked generated) record a layout's default placement on
their node and the node as params.topology; real results made here are drawn on this
machine's topology. What cannot be drawn is reported with the reason, never a crash.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import socket
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_topobind as topobind
from fleetgen import TOPOLOGY, FleetSpec, generate_fleet
from paths import KERNELS_BIN
from plans import plan_of

from topobind.draw.boxes import rank_colour
from topobind.plan.layouts import REGISTRY
from topobind.report.analysis import Options
from topobind.report.build import build_report
from topobind.report.layouts_seen import collect_layouts
from topobind.report.reader import read_results
from topobind.topo.topology import load

pytestmark = pytest.mark.slow

STREAM = KERNELS_BIN / "stream"
GEN_NODE = load("synthetic:" + TOPOLOGY)


def colour_pixels(png: bytes, colour: str) -> int:
    import matplotlib.image

    img = (matplotlib.image.imread(io.BytesIO(png))[..., :3] * 255).round().astype(int)
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return int((np.abs(img - rgb).sum(axis=2) <= 6).sum())


@pytest.fixture(scope="module")
def per_l3_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("per-l3")
    spec = FleetSpec(hosts=6, runs=2, kernels=("stream", "dgemm", "latency"), layout="per-l3")
    generate_fleet(root / "fleet", spec)
    build_report([str(root / "fleet")], root / "report", Options())
    return root / "report"


def test_generated_layout_is_drawn_in_the_report(per_l3_report: Path) -> None:
    out = per_l3_report
    doc = json.loads((out / "report.json").read_text())
    by_shape = {(x["layout"], x["ranks"], x["threads"]): x for x in doc["layouts"]}
    # stream and dgemm ran per-l3's default plan on the generated node (8 L3 domains of 8
    # cores): one drawing for both kernels and all six hosts; latency's one thread is its own
    big = by_shape[("per-l3", 8, 8)]
    assert big["hosts"] == 6 and big["kernels"] == ["dgemm", "stream"]
    assert big["variants"] == 1 and big["shared_pus"] == []
    assert "params.topology" in big["topology"]
    plan = plan_of(GEN_NODE, "per-l3")
    assert [r["cpus"] for r in big["placement"]] == [[p[0] for p in r.places] for r in plan.ranks]
    assert set(by_shape) == {("per-l3", 8, 8), ("per-l3", 1, 1)}
    assert doc["layouts_not_drawn"] == []
    # the picture: in the directory, in report.json's pictures, embedded in the Layouts section
    png = (out / big["picture"]).read_bytes()
    assert big["picture"] == "layout-per-l3-8x8.png" and png[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(png) < 400 * 1024
    kinds = {p["file"]: p["kind"] for p in doc["pictures"]}
    assert kinds["layout-per-l3-8x8.png"] == "layout" and kinds["layout-per-l3-1x1.png"] == "layout"
    html = (out / "index.html").read_text()
    section = html[html.index('<h2 id="layouts">Layouts</h2>') : html.index("<h2>Per host</h2>")]
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', section)
    assert len(embedded) == 2 and png in {base64.b64decode(e) for e in embedded}
    assert "<h2>Pictures</h2>" in html.split(section)[0]  # layouts not mixed into Pictures
    summary = (out / "summary.txt").read_text()
    assert "LAYOUTS:" in summary and "per-l3 (8 ranks x 8 threads): 6 hosts" in summary
    assert "layout-per-l3-8x8.png" in summary


def test_layout_picture_paints_each_recorded_rank(per_l3_report: Path) -> None:
    """8 ranks of 8 cores: each of the 8 rank colours covers the same area; rank 8's colour
    (no such rank) is absent."""
    png = (per_l3_report / "layout-per-l3-8x8.png").read_bytes()
    counts = [colour_pixels(png, rank_colour(r)) for r in range(8)]
    assert min(counts) > 8 * 200, counts
    assert max(counts) / min(counts) < 1.3, counts
    assert colour_pixels(png, rank_colour(8)) < 50


# per-gpu needs a node with GPUs (the generated fleet has none): tests/test_gpu_*.py
CPU_LAYOUTS = sorted(lay.usage for lay in REGISTRY if not lay.needs_gpus and not lay.parameter)


@pytest.mark.parametrize("layout", [*CPU_LAYOUTS, "l3-groups:16"])
def test_every_generated_layout_is_recorded_and_drawable(tmp_path: Path, layout: str) -> None:
    generate_fleet(
        tmp_path / "f", FleetSpec(hosts=2, runs=1, kernels=("stream", "whereami"), layout=layout)
    )
    lay = collect_layouts(read_results([tmp_path / "f"]).runs, local_host="elsewhere")
    plan = plan_of(GEN_NODE, layout)
    seen = {(s.ranks, s.threads): s for s in lay.seen}
    drawn = seen[(plan.nranks, plan.threads)]  # stream: the layout's plan
    assert drawn.layout == layout and drawn.hosts == ("gen-node0001", "gen-node0002")
    assert [r.places for r in drawn.plan.ranks] == [r.places for r in plan.ranks]
    assert [r.cores for r in drawn.plan.ranks] == [r.cores for r in plan.ranks]
    assert (1, 4) in seen  # whereami's 4 threads, one line each, merged
    assert lay.not_drawn == ()


def _write(path: Path, doc: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _stream_docs(tmp_path: Path) -> list[dict[str, object]]:
    generate_fleet(
        tmp_path / "gen", FleetSpec(hosts=1, runs=2, kernels=("stream",), layout="per-numa")
    )
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "gen").rglob("*.json"))]


def test_what_cannot_be_drawn_is_noted_and_the_report_still_written(tmp_path: Path) -> None:
    first, second = _stream_docs(tmp_path)
    res = tmp_path / "results"

    def variant(host: str, **changes: object) -> None:
        doc = json.loads(json.dumps(first)) | {"host": host}
        for key, value in changes.items():
            if key == "topology":
                doc["params"]["topology"] = value  # type: ignore[index]
            elif value is None:
                doc.pop(key, None)
            else:
                doc[key] = value
        _write(res / host / "stream.json", doc)

    variant("ok-node")
    variant("half-node", placement=first["placement"][:16])  # type: ignore[index]
    variant("foreign-node", topology=None)
    variant("bad-topo-node", topology="pack:2 bogus:7")
    variant("other-machine", topology="pack:1 numa:1 l3:1 core:4 pu:1")
    variant("lost-cpu-node", placement=[e | {"cpu": -1} for e in first["placement"]])  # type: ignore[union-attr]
    variant("no-ranks-node", ranks=None)
    variant("odd-node", placement=[{"rank": 0}])  # not as documented
    _write(res / "ok-node" / "stream-2.json", second | {"host": "ok-node"})
    proc = topobind("report", str(res), "-o", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "report" / "report.json").read_text())
    (drawn,) = doc["layouts"]
    assert drawn["host_names"] == ["ok-node"] and (drawn["ranks"], drawn["threads"]) == (4, 16)
    reasons = {n["host_names"][0]: n["reason"] for n in doc["layouts_not_drawn"]}
    assert set(reasons) == {
        "half-node",
        "foreign-node",
        "bad-topo-node",
        "other-machine",
        "lost-cpu-node",
        "no-ranks-node",
        "odd-node",
    }
    assert "48 of 64 threads is not in the results" in reasons["half-node"]
    assert "--topology SRC" in reasons["foreign-node"]
    assert (
        "'pack:2 bogus:7' is not a usable hwloc synthetic description" in reasons["bad-topo-node"]
    )
    assert "PU 4 (OS index, rank 0 thread 4) is not in" in reasons["other-machine"]
    assert "unknown PU (cpu -1)" in reasons["lost-cpu-node"]
    assert '"ranks" and "threads"' in reasons["no-ranks-node"]
    assert 'no readable "placement"' in reasons["odd-node"]
    summary = (tmp_path / "report" / "summary.txt").read_text()
    for host, reason in reasons.items():
        assert f"({host}): {reason}" in summary
    assert sorted(p.name for p in (tmp_path / "report").glob("layout-*.png")) == [
        "layout-per-numa-4x16.png"
    ]
    html = (tmp_path / "report" / "index.html").read_text()
    assert "Not drawn:" in html and "foreign-node" in html


def test_topology_option_draws_foreign_results_and_bad_one_is_refused(tmp_path: Path) -> None:
    first, _ = _stream_docs(tmp_path)
    doc = json.loads(json.dumps(first))
    del doc["params"]["topology"]
    _write(tmp_path / "res" / "node042.json", doc | {"host": "node042"})
    proc = topobind("report", str(tmp_path / "res"), "-o", str(tmp_path / "r1"))
    assert proc.returncode == 0 and "not drawn: per-numa (4 ranks x 16 threads)" in proc.stdout
    proc = topobind(
        "report", str(tmp_path / "res"), "-o", str(tmp_path / "r2"), "--topology",
        "synthetic:" + TOPOLOGY,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (drawn,) = json.loads((tmp_path / "r2" / "report.json").read_text())["layouts"]
    assert drawn["topology"].startswith("the topology given with --topology")
    assert (tmp_path / "r2" / drawn["picture"]).is_file()
    proc = topobind(
        "report", str(tmp_path / "res"), "-o", str(tmp_path / "r3"), "--topology", "nope.xml"
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "nope.xml" in proc.stderr and not (tmp_path / "r3").exists()


def test_hosts_that_ran_a_layout_differently_get_their_own_drawing(tmp_path: Path) -> None:
    first, _ = _stream_docs(tmp_path)
    for i in range(3):
        _write(tmp_path / "res" / f"n{i}.json", first | {"host": f"n{i}"})
    # n9 bound rank 1 onto rank 0's cores: PUs 0-15 run two threads each
    wrong = json.loads(json.dumps(first)) | {"host": "n9"}
    for e in wrong["placement"]:
        if e["rank"] == 1:
            e["cpu"], e["numa"] = e["cpu"] - 16, 0
    _write(tmp_path / "res" / "n9.json", wrong)
    built = build_report([str(tmp_path / "res")], tmp_path / "r", Options())
    seen = built.report.layouts.seen
    assert [(s.variant, s.variants, s.hosts) for s in seen] == [
        (1, 2, ("n0", "n1", "n2")),
        (2, 2, ("n9",)),
    ]
    assert seen[1].shared_pus == tuple(range(16)) and seen[0].shared_pus == ()
    pics = {p.filename: p for p in built.pictures if p.kind == "layout"}
    assert set(pics) == {"layout-per-numa-4x16-1.png", "layout-per-numa-4x16-2.png"}
    assert "differs from the most common one" in pics["layout-per-numa-4x16-2.png"].caption
    assert "PUs 0-15 ran more than one thread" in pics["layout-per-numa-4x16-2.png"].caption
    # rank 1's colour covers no core of its own: it shares rank 0's cores (striped)
    png1 = pics["layout-per-numa-4x16-1.png"].png
    png2 = pics["layout-per-numa-4x16-2.png"].png
    assert colour_pixels(png2, rank_colour(1)) < 0.7 * colour_pixels(png1, rank_colour(1))


def test_results_without_layout_draw_nothing(tmp_path: Path) -> None:
    generate_fleet(tmp_path / "f", FleetSpec(hosts=3, runs=2, kernels=("stream",)))
    built = build_report([str(tmp_path / "f")], tmp_path / "r", Options())
    assert not built.report.layouts and not [p for p in built.pictures if p.kind == "layout"]
    assert "LAYOUTS" not in built.text
    assert '<h2 id="layouts">' not in (tmp_path / "r" / "index.html").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not STREAM.exists(), reason="kernels/bin/stream not built (make kernels)")
def test_real_runs_here_are_drawn_on_this_machine(tmp_path: Path) -> None:
    ncpu = len(os.sched_getaffinity(0))
    proc = topobind(
        "bench", "stream", "--layout", "compact", "--repeat", "2", "--results",
        str(tmp_path / "res"), "--", "--elements", "2M", "--trials", "3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = sorted((tmp_path / "res").rglob("*.json"))
    recorded = json.loads(results[0].read_text())
    assert recorded["layout"] == "compact" and recorded["host"] == socket.gethostname()
    # topobind bench records the node (params.topology); without it, results made on this
    # machine are drawn on its live topology.
    assert recorded["params"]["topology"].startswith("synthetic:")
    proc = topobind("report", str(tmp_path / "res"), "-o", str(tmp_path / "r0"))
    assert proc.returncode == 0, proc.stderr
    (drawn,) = json.loads((tmp_path / "r0" / "report.json").read_text())["layouts"]
    assert drawn["topology"].startswith("the topology recorded in the results")
    for path in results:
        doc = json.loads(path.read_text())
        del doc["params"]["topology"]
        path.write_text(json.dumps(doc))
    proc = topobind("report", str(tmp_path / "res"), "-o", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    (drawn,) = doc["layouts"]
    assert (drawn["layout"], drawn["ranks"], drawn["threads"]) == ("compact", 1, ncpu)
    assert drawn["topology"].startswith("this machine's topology")
    cpus = [e["cpu"] for e in sorted(recorded["placement"], key=lambda e: e["thread"])]
    assert drawn["placement"][0]["cpus"] == cpus
    assert (tmp_path / "r" / drawn["picture"]).read_bytes()[:4] == b"\x89PNG"


def test_planned_layouts_from_a_hook_are_marked_planned(tmp_path: Path) -> None:
    """layout_pictures_hook adds drawings of plans: kind 'plan', in the Layouts section apart
    from the recorded drawings, never captioned as where threads really ran."""
    from topobind.report.layouts_drawn import layout_pictures_hook
    from topobind.topo.topology import load

    generate_fleet(tmp_path / "fleet", FleetSpec(hosts=3, runs=2, kernels=("stream",),
                                                 layout="per-l3"))  # fmt: skip
    plan = plan_of(load("betzy-epyc7742"), "every-other-core")
    built = build_report(
        [str(tmp_path / "fleet")], tmp_path / "r", hooks=[layout_pictures_hook([plan])]
    )
    assert built is not None
    page = (tmp_path / "r" / "index.html").read_text()
    layouts = page[page.index('<h2 id="layouts">') :]
    assert "Planned layouts added to this report" in layouts
    planned = layouts[layouts.index("Planned layouts added") :]
    assert "plan-every-other-core-64x1.png" in planned
    assert "(planned)" in planned and "really ran" not in planned.split("</figure>")[0]
    assert (tmp_path / "r" / "plan-every-other-core-64x1.png").exists()


def test_identical_placements_share_one_drawing_however_the_topology_was_found(
    tmp_path: Path,
) -> None:
    """One placement on one host is one drawing: a kernel whose results record
    params.topology and another whose results do not (drawn on this machine), and another host
    of the same node type recording params.topology, all share it (issue 11 item 7)."""
    from topobind.topo.topology import load_live, synthetic_description

    live = load_live()
    desc = synthetic_description(live)
    if desc is None:
        pytest.skip("hwloc cannot describe this machine as a synthetic topology")
    first, _ = _stream_docs(tmp_path)
    pu = live.cores[0].pus[0]
    numa = live.cores[0].numa[0] if live.cores[0].numa else 0

    def result(host: str, kernel: str, topology: str | None) -> dict[str, object]:
        doc = json.loads(json.dumps(first))
        params = doc["params"]
        params.pop("topology", None)
        if topology is not None:
            params["topology"] = topology
        placement = [{"rank": 0, "thread": 0, "cpu": pu, "numa": numa}]
        return doc | {"host": host, "kernel": kernel, "ranks": 1, "threads": 1,
                      "placement": placement}  # fmt: skip

    res = tmp_path / "res"
    _write(res / "here" / "stream.json", result("here", "stream", desc))
    _write(res / "here" / "dgemm.json", result("here", "dgemm", None))
    _write(res / "other" / "stream.json", result("other", "stream", desc))
    lay = collect_layouts(read_results([res]).runs, local_host="here")
    assert lay.not_drawn == ()
    (seen,) = lay.seen
    assert (seen.variant, seen.variants, seen.hosts) == (1, 1, ("here", "other"))
    assert seen.kernels == ("dgemm", "stream") and seen.filename == "layout-per-numa-1x1.png"
    # a result without params.topology from this host is drawn on the same node as the rest
    _write(res / "here" / "dgemm.json", result("here", "dgemm", None))
    only_live = collect_layouts(read_results([res / "here" / "dgemm.json"]).runs, None, "here")
    assert only_live.seen[0].topology.startswith("this machine's topology")
