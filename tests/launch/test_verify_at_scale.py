"""`topobind run --verify` at the scale of a fleet, in-process (issue 47 item 7): 64 identical
nodes printed 64 rows in string order (node1, node10, ..., node2) and a last line naming
every node (700 characters). Identical rows are grouped with their ranks and nodes in
Slurm's hostlist notation, in natural order, and the output's size is bounded whatever the
node count (5,000 simulated nodes here)."""

from __future__ import annotations

import contextlib
import io

import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from topobind.cli.commands import run as run_cmd
from topobind.launch.run import Verdict
from topobind.launch.verify import Observed, compare, table
from topobind.launch.verify_memory import ProbeRow, probe_table
from topobind.plan.model import PlannedRank
from topobind.topo import hostlist

PLANNED = [PlannedRank(0, ((0,), (1,)), (0, 1)), PlannedRank(1, ((2,), (3,)), (2, 3))]


def _observed(nodes: int, bad: set[str] = frozenset()) -> list[Observed]:  # type: ignore[assignment]
    out = []
    for n in range(1, nodes + 1):
        host = f"node{n}"
        for local, pr in enumerate(PLANNED):
            for t, place in enumerate(pr.places):
                cpu = place[0] if host not in bad else 9
                out.append(Observed(host, 2 * (n - 1) + local, t, cpu, (cpu,)))
    return out


def _verdict_stderr(verdict: Verdict) -> str:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.suppress(run_cmd.VerifyFailed):
        run_cmd._print_verdict(verdict)
    return err.getvalue()


@pytest.mark.parametrize("nodes", [64, 5000])
def test_identical_nodes_give_grouped_rows_and_one_short_line(nodes: int) -> None:
    rows = compare(PLANNED, _observed(nodes), nnodes=nodes)
    memory = [ProbeRow(r, f"node{r // 2 + 1}", None, "bind", (0,), 0) for r in range(2 * nodes)]
    err = _verdict_stderr(Verdict(rows, memory_rows=memory))
    lines = err.splitlines()
    assert f"{2 * nodes:,} ranks, node[1-{nodes}]: " in err
    assert len(lines) <= 8 and max(map(len, lines)) <= 300, err
    assert lines[-1].endswith(f"bound to them, on {nodes} nodes: node[1-{nodes}]"), lines[-1]
    text = table(rows)
    assert len(text.splitlines()) == 2 + 4 + 1  # headers, one group a planned thread, total
    assert f"{nodes:,} ranks, node[1-{nodes}]:      1  1 " in text


def test_a_failing_fleet_shows_its_failures_first_and_stays_bounded() -> None:
    """Every node odd (node1, node3, ...) is wrong: the failures come first, the node list is
    cut at about 100 characters with the count, at most MAX_GROUPS kinds of rows."""
    bad = {f"node{n}" for n in range(1, 5001, 2)}
    rows = compare(PLANNED, _observed(5000, bad), nnodes=5000)
    text = table(rows)
    lines = text.splitlines()
    assert len(lines) <= 2 + hostlist.MAX_GROUPS + 1 and max(map(len, lines)) <= 300
    assert "MISMATCH" in lines[2] and "(2,500 nodes)" in lines[2], lines[2]
    assert lines[2].startswith("2,500 ranks, node[1,3,5,7,")
    err = _verdict_stderr(Verdict(rows))
    assert len(err.splitlines()) <= 2 + hostlist.MAX_GROUPS + 1


def test_few_ranks_keep_one_row_each() -> None:
    rows = compare(PLANNED, _observed(2), nnodes=2)
    assert len(table(rows).splitlines()) == 2 + 8 + 1
    memory = [ProbeRow(r, f"node{r // 2 + 1}", None, "bind", (0,), 0) for r in range(4)]
    assert len(probe_table(memory).splitlines()) == 1 + 4


def test_node_lists_are_natural_hostlists_and_bounded() -> None:
    assert hostlist.shown(["node10", "node2", "node1", "node2"]) == "node[1-2,10]"
    assert hostlist.shown(["b", "a10", "a9"]) == "a[9-10],b"
    many = hostlist.shown(f"n{i}" for i in range(0, 20000, 3))
    assert len(many) <= hostlist.MAX_SHOWN + 30 and many.endswith("...] (6,667 nodes)"), many
    assert sorted(["node10", "node2"], key=hostlist.natural_key) == ["node2", "node10"]
    lines = hostlist.grouped((r, f"node{r}", "same") for r in range(1, 10001))
    assert lines == ["10,000 ranks, node[1-10000]: same"]
    lines = hostlist.grouped((r, "node1", f"row {r}") for r in range(1000))
    assert len(lines) == hostlist.MAX_GROUPS + 1
    assert lines[-1] == "... and 980 more kinds of rows (980 ranks)"


@fuzz(200)
@given(
    names=st.lists(
        st.tuples(st.sampled_from(["node", "n", "gpu-", "login"]), st.integers(0, 300),
                  st.booleans()).map(lambda t: f"{t[0]}{t[1]:03d}" if t[2] else f"{t[0]}{t[1]}"),
        max_size=400,
    )
)  # fmt: skip
def test_shown_node_lists_expand_back_or_say_how_many(names: list[str]) -> None:
    """Whatever the names: a list that fits expands back to the same nodes; one that does
    not is cut at about MAX_SHOWN characters and says how many nodes it had."""
    text = hostlist.shown(names)
    unique = set(names)
    if text.endswith(" nodes)"):
        assert len(text) <= hostlist.MAX_SHOWN + 30 and f"({len(unique):,} nodes)" in text
    else:
        assert set(hostlist.expand(text)) == unique if unique else text == ""
