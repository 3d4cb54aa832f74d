"""Where in a node (issue 45 item 3): measure/where.py names the NUMA node or core a node's own
matrices set apart, within the node or against the fleet's same matrix, and nothing where
the matrix is uniform, of one NUMA node, or hostile. The wiring into validate --each-node's
``cause:`` line: tests/validation/test_where_wiring.py."""

from __future__ import annotations

import json
import math
from array import array
from pathlib import Path
from typing import Any

import pytest

from topobind.measure import where
from topobind.measure.results import Matrix, read_matrices

DATA = Path(__file__).resolve().parents[1] / "data" / "where"


def _numa(name: str, grid: list[list[Any]], unit: str = "MB/s",
          labels: list[int] | None = None) -> Matrix:  # fmt: skip
    labels = labels or list(range(len(grid)))
    doc = {"unit": unit, "rows": labels, "cols": labels, "row_kind": "numa",
           "col_kind": "numa", "values": grid}  # fmt: skip
    return read_matrices({name: doc})[name]


def _bw(n: int, local: float = 41000.0, remote: float = 20000.0) -> list[list[float]]:
    """An n-node read-bandwidth matrix, a little noise on every element."""
    return [[(local if i == j else remote) * (1 + 0.01 * ((3 * i + j) % 5 - 2))
             for j in range(n)] for i in range(n)]  # fmt: skip


def test_a_halved_memory_node_is_named_with_its_figure_and_its_peers() -> None:
    grid = _bw(8)
    for i in range(8):
        grid[i][5] /= 2  # node 5's memory, read by every node: a channel missing
    got = where.apart(_numa("read_bw", grid))
    assert got, "a halved node named nothing"
    assert got[0].place == "NUMA node 5"
    assert got[0].text() == "NUMA node 5: read bandwidth 20 GB/s, its peers 41: a memory channel?"
    assert {w.place for w in got} == {"NUMA node 5"}


def test_uniform_noise_names_nothing() -> None:
    assert where.apart(_numa("read_bw", _bw(8))) == []
    lat = [[(110.0 if i == j else 180.0) * (1 + 0.03 * ((i + 2 * j) % 3 - 1)) for j in range(4)]
           for i in range(4)]  # fmt: skip
    assert where.apart(_numa("latency", lat, "ns")) == []


def test_a_slow_latency_row_names_its_node_and_lower_is_better() -> None:
    lat = [[110.0 if i == j else 180.0 for j in range(4)] for i in range(4)]
    lat[2] = [v * 1.6 for v in lat[2]]  # node 2's CPUs: every load slower
    got = where.apart(_numa("latency", lat, "ns"))
    assert got[0].text() == "NUMA node 2: latency 176 ns, its peers 110"
    faster = [[110.0 if i == j else 180.0 for j in range(4)] for i in range(4)]
    faster[2][2] = 60.0  # better is never "apart"
    assert where.apart(_numa("latency", faster, "ns")) == []


def test_the_fleets_median_is_the_reference_when_there_is_one() -> None:
    """Node 3 legitimately slower on every node (an HBM-less node type, say): within the node
    it would look apart; against the fleet's same matrix it is not, and a node whose own
    node 1 is halved is."""

    def node(scale1: float) -> Matrix:
        grid = _bw(4)
        for i in range(4):
            grid[i][3] *= 0.5
            grid[i][1] *= scale1
        return _numa("read_bw", grid)

    fleet = [node(1.0), node(1.02), node(0.99)]
    ref = where.fleet_reference(fleet)
    assert ref is not None
    assert where.apart(node(1.0), ref) == []
    got = where.apart(node(0.5), ref)
    assert got and got[0].place == "NUMA node 1"
    assert got[0].against == "fleet"
    assert where.where_text({"read_bw": node(0.5)}, {"read_bw": fleet}).startswith(
        "where: NUMA node 1: read bandwidth 2"
    )


def test_a_slow_core_is_named_from_the_core_to_core_matrix() -> None:
    n = 8
    grid: list[list[Any]] = [[None if i == j else 40.0 + (i + j) % 3 for j in range(n)]
                             for i in range(n)]  # fmt: skip
    for j in range(n):
        if j != 7:
            grid[7][j] = grid[j][7] = 95.0
    m = read_matrices(
        {
            "c2c": {
                "unit": "ns",
                "rows": list(range(n)),
                "cols": list(range(n)),
                "row_kind": "cpu",
                "col_kind": "cpu",
                "values": grid,
            }
        }
    )["c2c"]
    got = where.apart(m)
    assert [w.text() for w in got] == ["core 7: core-to-core 95 ns, its peers 41"]


@pytest.mark.parametrize("n", [1, 2])
def test_one_or_two_numa_nodes_name_nothing(n: int) -> None:
    """One node has no peer; two cannot say which of them is apart."""
    grid = _bw(n)
    grid[0][0] /= 3
    assert where.apart(_numa("read_bw", grid)) == []


def test_a_memory_only_node_is_no_peer_of_the_others() -> None:
    """Rows: the 4 nodes with CPUs; cols: also node 4, CXL memory at a third of the speed."""
    grid = [row + [7000.0] for row in _bw(4)]
    m = read_matrices(
        {
            "read_bw": {
                "unit": "MB/s",
                "rows": [0, 1, 2, 3],
                "cols": [0, 1, 2, 3, 4],
                "row_kind": "numa",
                "col_kind": "numa",
                "values": grid,
            }
        }
    )
    assert where.apart(m["read_bw"]) == []


def _hostile() -> list[Matrix]:
    nan = math.nan
    lab = (0, 1, 2, 3)
    return [
        _numa("read_bw", [[nan] * 4 for _ in range(4)]),
        _numa("read_bw", [[None] * 4 for _ in range(4)]),
        _numa("read_bw", [[0.0] * 4 for _ in range(4)]),
        _numa("read_bw", [[-1.0, math.inf, 1e308, 1e-308] for _ in range(4)]),
        Matrix("read_bw", "MB/s", lab, lab, "numa", "numa", array("d", [1.0] * 5)),  # ragged
        Matrix("read_bw", "MB/s", lab, lab, "weird", "numa", array("d", [1.0] * 16)),
        Matrix("unknown", "MB/s", lab, lab, "numa", "numa", array("d", [1.0] * 16)),
        Matrix("c2c", "ns", (0,), (0,), "cpu", "cpu", array("d", [nan])),
    ]


@pytest.mark.parametrize("m", _hostile(), ids=lambda m: f"{m.name}-{m.row_kind}")
def test_hostile_matrices_never_raise(m: Matrix) -> None:
    assert isinstance(where.apart(m), list)
    assert isinstance(where.apart(m, m), list)
    assert where.fleet_reference([m, m, m]) is None or isinstance(
        where.apart(_numa("read_bw", _bw(4)), where.fleet_reference([m, m, m])), list
    )
    assert isinstance(where.where_text({"x": m}, {"x": [m, m]}), str)


def _real(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / name).read_text())
    return doc


def test_a_real_one_numa_node_result_names_nothing() -> None:
    """latency --matrix --bw-matrix on this kind of machine (one NUMA node): 1 x 1."""
    ms = read_matrices(_real("latency-1numa.json")["matrices"])
    assert {"latency", "read_bw"} <= set(ms)
    assert all(where.apart(m) == [] for m in ms.values())


@pytest.mark.parametrize("node", [0, 1, 2, 3])
def test_a_real_four_numa_guest_result_names_the_node_halved_first(node: int) -> None:
    """The 4-NUMA QEMU guest's ``latency --matrix --bw-matrix`` (scripts/numa-vm, shape
    numa4, 7 trials, 32M): its TCG figures are the emulator's, not a memory system's, and
    twofold apart as measured (about 0.65 and 1.3 GB/s), so the rule names nodes in it as it
    is; with one node's memory halved (its column, the local element included), that node is
    named first."""
    doc = _real("latency-numa4-guest.json")
    ms = read_matrices(doc["matrices"])
    assert ms["read_bw"].rows == (0, 1, 2, 3) and ms["latency"].rows == (0, 1, 2, 3)
    grid = [list(r) for r in doc["matrices"]["read_bw"]["values"]]
    for row in grid:
        row[node] /= 2
    got = where.apart(_numa("read_bw", grid))
    assert got and got[0].place == f"NUMA node {node}"
    assert got[0].text().startswith(f"NUMA node {node}: read bandwidth ")
    assert got[0].hint == "a memory channel?"


def test_a_checks_core_pair_slower_than_the_fleets_is_said_once_as_a_link() -> None:
    """C2CCheck measures one pair: a 2 x 2 symmetric matrix; neither core can be told from
    the other, so the pair is said, once."""

    def pair(ns: float) -> Matrix:
        doc = {"unit": "ns", "rows": [0, 1], "cols": [0, 1], "row_kind": "cpu",
               "col_kind": "cpu", "values": [[None, ns], [ns, None]]}  # fmt: skip
        return read_matrices({"c2c": doc})["c2c"]

    fleet = [pair(119.0), pair(123.0), pair(123.5)]
    assert where.apart(pair(124.0), where.fleet_reference(fleet)) == []
    got = where.apart(pair(160.0), where.fleet_reference(fleet))
    assert [w.text() for w in got] == ["core 0 -> 1: core-to-core 160 ns, fleet 123"]
    assert where.apart(pair(160.0)) == []  # within the node: no peers
