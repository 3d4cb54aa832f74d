"""Topology parsing against hwloc's own tools on the shared machines."""

from __future__ import annotations

import subprocess

import pytest
from paths import TOPOLOGIES
from topo_sources import BETZY, all_sources

from topobind.errors import TopologyError
from topobind.topo.topology import format_list, load, parse_hwloc_bitmap, parse_list


def hwloc_calc(xml_or_synth: str, *args: str) -> str:
    src = xml_or_synth.removeprefix("synthetic:")
    out = subprocess.run(["hwloc-calc", "--input", src, *args], capture_output=True, text=True)
    return out.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("name,source", all_sources())
def test_pus_and_cores_match_hwloc_calc(name: str, source: str) -> None:
    topo = load(source)
    # hwloc-calc lists usable PUs by OS index; same set and same logical order.
    pus_os = [int(x) for x in hwloc_calc(source, "-I", "pu", "--po", "all").split(",")]
    assert sorted(topo.pus) == sorted(pus_os)
    ncores = int(hwloc_calc(source, "-N", "core", "all") or 0)  # empty: no Core objects
    assert len(topo.cores) == (ncores or len(topo.pus))
    # Each core's PUs (logical core i) equal hwloc-calc's expansion of core:i.
    if ncores:
        for core in topo.cores[:: max(1, len(topo.cores) // 7)]:
            got = hwloc_calc(source, "-I", "pu", "--po", f"core:{core.logical}")
            assert sorted(core.pus) == parse_list(got), core


@pytest.mark.slow
@pytest.mark.parametrize("name,source", all_sources())
def test_numa_and_l3_match_hwloc_calc(name: str, source: str) -> None:
    topo = load(source)
    n_numa = int(hwloc_calc(source, "-N", "numa", "all"))
    assert len(topo.numa_nodes) == n_numa  # hwloc-calc counts NUMA nodes with CPUs
    if topo.shared_cache_level == 3:
        assert len(topo.l3_domains) == int(hwloc_calc(source, "-N", "l3cache", "all"))
        dom = topo.l3_domains[-1]
        got = hwloc_calc(source, "-I", "pu", "--po", f"l3cache:{dom.logical}")
        assert sorted(dom.pus) == parse_list(got)


def test_betzy_shape() -> None:
    topo = load(BETZY)
    assert (len(topo.packages), len(topo.numa_nodes), len(topo.l3_domains)) == (2, 8, 32)
    assert len(topo.cores) == 128 and topo.smt == 2
    assert topo.cores[5].pus == (5, 133)
    assert topo.numa_nodes[1].os_index == 1 and topo.numa_nodes[1].cores == tuple(range(16, 32))


def test_offline_and_disallowed_pus_are_excluded_and_reported() -> None:
    topo = load(str(TOPOLOGIES / "16em64t-4s2c2t-offlines.xml"))
    assert len(topo.pus) == 7
    assert topo.excluded_pus and set(topo.excluded_pus.values()) == {"offline"}
    assert not set(topo.excluded_pus) & set(topo.pus)
    topo = load(str(TOPOLOGIES / "64intel64-3g2n+2n-irregulargroups+pci.xml"))
    assert len(topo.pus) == 16
    assert "not in the allowed cpuset (cgroup)" in topo.excluded_pus.values()


def test_cpu_kinds_and_distances() -> None:
    kinds = load(str(TOPOLOGIES / "fakecpukinds.xml")).cpu_kinds
    assert len(kinds) == 3 and kinds[0].efficiency == 0
    topo = load(str(TOPOLOGIES / "24em64t-2n6c2t-pci.xml"))
    assert topo.numa_distances["NUMALatency"] == [[10, 20], [20, 10]]


def test_no_shared_cache_is_reported() -> None:
    topo = load(str(TOPOLOGIES / "16-2gr2gr2n2c+misc.xml"))
    assert topo.shared_cache_level is None and not topo.l3_domains


def test_live_topology_is_this_machine() -> None:
    import os

    topo = load("live")
    assert set(topo.pus) == os.sched_getaffinity(0)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("0x00000003", {0, 1}),
        ("0x00000001,,0x0", {64}),
        ("0xffffffff,0x1", set(range(32, 64)) | {0}),
    ],
)
def test_bitmap(text: str, expected: set[int]) -> None:
    assert parse_hwloc_bitmap(text) == expected


def test_list_roundtrip() -> None:
    assert format_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert parse_list("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]


@pytest.mark.parametrize(
    "source,message",
    [
        ("/no/such/file.xml", "does not exist"),
        ("synthetic:", "empty synthetic description"),
        ("synthetic:pack:2 bogus:3", "hwloc could not build a topology"),
        ("synthetic:pack:1000 core:1000 pu:1", "more than 16384 PUs"),
        ("/tmp", "is a directory"),
    ],
)
def test_bad_sources(source: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        load(source)


def test_malformed_xml(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.xml"
    bad.write_text('<?xml version="1.0"?><topology version="2.0"><object type="Machine"')
    with pytest.raises(TopologyError, match="malformed hwloc XML"):
        load(str(bad))
    empty = tmp_path / "empty.xml"
    empty.write_text('<topology version="2.0"><object type="Machine" cpuset="0x0"/></topology>')
    with pytest.raises(TopologyError, match="no PU"):
        load(str(empty))


def test_named_topologies_are_the_shared_synthetic_lines() -> None:
    from topobind.topo.topology import NAMED_TOPOLOGIES

    tsv = TOPOLOGIES / "synthetic.tsv"
    if not tsv.exists():
        pytest.skip(f"{tsv} not found")
    shared = {}
    for line in tsv.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, desc = line.split("\t")[:2]
            shared[name] = desc
    for name, desc in NAMED_TOPOLOGIES.items():
        assert shared[name] == desc, name
    topo = load("betzy-epyc7742")
    assert topo.source == "synthetic:" + shared["betzy-epyc7742"]
    assert (len(topo.packages), len(topo.numa_nodes), len(topo.cores)) == (2, 8, 128)


def test_unknown_name_lists_the_named_topologies() -> None:
    with pytest.raises(TopologyError) as exc:
        load("betzy")
    assert "betzy-epyc7742" in str(exc.value) and "\n" not in str(exc.value)
