"""The typed request at the edge: a planning command's options become one PlanRequest (the
layout parsed once, where the ranks per node come from), and the engine plans from it."""

from __future__ import annotations

import pytest

from topobind.cli import main as cli
from topobind.cli.commands.common import request_from
from topobind.errors import PlanError
from topobind.plan import request
from topobind.plan.layouts import REGISTRY
from topobind.topo.topology import load

EPYC = "synthetic:pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)"


def _args(*argv: str):  # the namespace argparse gives the run command
    return cli.build_parser(("topobind.cli.commands.run",)).parse_args(["run", *argv, "--", "true"])


def test_options_become_one_typed_request() -> None:
    args = _args("-t", EPYC, "-l", "l3-groups:4", "-r", "8", "-T", "2", "--smt")
    req = request_from(args)
    assert req.layout is next(lay for lay in REGISTRY if lay.name == "l3-groups")
    assert (req.parameter, req.spelled, req.topology) == (4, "l3-groups:4", EPYC)
    assert (req.ranks, req.threads, req.smt, req.cpukind) == (8, 2, True, "performance")
    assert req.options == {} and not req.follow_allocation


def test_only_the_per_layout_options_given_are_kept() -> None:
    req = request_from(_args("-t", EPYC, "-l", "per-gpu", "--gpus-per-rank", "2"))
    assert req.options == {"gpus_per_rank": 2}


def test_a_bad_layout_is_refused_when_the_request_is_made() -> None:
    with pytest.raises(PlanError, match="unknown layout 'nosuch'"):
        request_from(_args("-l", "nosuch"))


def test_every_field_but_the_parsed_ones_is_an_option_of_the_same_name() -> None:
    """What makes a new option one line: a field named as its dest is filled by name."""
    given = vars(_args("-t", EPYC, "-l", "compact"))
    derived = {"layout", "parameter", "options", "follow_allocation", "allocation"}
    assert set(request.PlanRequest._fields) - derived <= given.keys()


@pytest.mark.parametrize(
    ("layout", "ranks", "follow", "tasks", "expected"),
    [
        ("compact", 3, True, 8, 3),  # --ranks wins
        ("compact", None, True, 8, 8),  # the allocation's tasks
        ("compact", None, False, 8, None),  # not following: the layout's default
        ("per-l3", None, True, 8, None),  # one rank per domain: the layout counts
        ("per-l3", 2, True, 8, 2),
    ],
)
def test_where_the_ranks_come_from(
    layout: str, ranks: int | None, follow: bool, tasks: int, expected: int | None
) -> None:
    req = request.parse(layout, ranks=ranks, follow_allocation=follow)
    assert req.ranks_for(tasks) == expected


def test_the_ignore_variable_is_read_where_the_request_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = _args("-t", EPYC, "-l", "compact")
    assert request_from(args, job=True).follow_allocation
    assert not request_from(args, job=False).follow_allocation
    monkeypatch.setenv(request.IGNORE_ALLOCATION_TASKS, "1")
    assert not request_from(args, job=True).follow_allocation


def test_a_job_plan_follows_the_allocation_and_warns_when_ranks_differ() -> None:
    """Planning reads the allocation record, no environment variable (issue 40 item 1)."""
    from topobind.topo.allocation import Allocation, TasksPerNode

    six = TasksPerNode(6, "SLURM_NTASKS_PER_NODE=6")
    alloc = Allocation("slurm", 1, tasks=lambda: six)
    topo = load(EPYC)
    plan = request.plan(topo, request.parse("spread", follow_allocation=True, allocation=alloc))
    assert plan.nranks == 6 and not plan.warnings
    plan = request.plan(topo, request.parse("per-numa", follow_allocation=True, allocation=alloc))
    assert plan.nranks == 8
    assert any("allocation has 6 tasks per node" in w for w in plan.warnings)
