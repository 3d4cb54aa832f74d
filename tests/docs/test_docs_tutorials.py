"""The tutorials "Accepting new nodes" and "topobind in your ReFrame CI" run as written and
print what their pages show, in the parts that do not depend on the machine
(tests/docs/tutorial_pages.py says how a page marks its blocks and what is masked).

The parts on the local 3-node cluster share the session's cluster (slurm_cluster3); run
them by hand under ``flock /tmp/tb-slurm.lock``. Both stay cheap: one STREAM check with
small arrays, two runs a node.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
import tutorial_pages as tp
from paths import REPO
from slurm_helpers import SlurmCluster, slurm_cluster3  # noqa: F401  (fixture)

ACCEPT = REPO / "docs" / "tutorials" / "accepting-new-nodes.md"
CI = REPO / "docs" / "tutorials" / "reframe-ci.md"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TOPOBIND_", "PYTEST_"))}  # fmt: skip
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    return env


def _node_counts() -> dict[str, int]:
    from topobind.topo.topology import load
    from topobind.validation.sites import node_counts

    return dict(node_counts(load("live")))


def _with_this_node(todo: list[tp.Step]) -> list[tp.Step]:
    """The page's node: section with this machine's counts (the page shows its own)."""
    counts = _node_counts()
    out = []
    for s in todo:
        if s.kind == "append":
            lines = []
            for line in s.text.splitlines(keepends=True):
                key = line.strip().split(":")[0]
                if line.startswith("  ") and not line.startswith("   ") and key in counts:
                    line = f"  {key}: {counts[key]}\n"
                lines.append(line)
            s = tp.Step(s.kind, s.arg, "".join(lines), s.shown)
        out.append(s)
    return out


def _check(page: Path, kinds: set[str], home: Path, env: dict[str, str],
           hosts: tuple[str, ...], timeout: float) -> None:  # fmt: skip
    todo = [s for s in tp.steps(page) if s.kind in kinds | {"file", "append", "run"}]
    got = tp.run(_with_this_node(todo), home, env, timeout)
    dump = os.environ.get("TB_TUTORIAL_DUMP")  # capturing a page's output: where to write it
    if dump:
        with open(dump, "a") as f:
            f.writelines(f"$ {s.text}\n{got[i]}\n" for i, s in enumerate(todo) if i in got)
    for i, s in enumerate(todo):
        if s.kind in ("file", "append") or s.text == tp.START:
            continue
        shown = tp.normalize(s.shown, hosts)
        seen = tp.normalize(got[i].splitlines(), hosts)
        assert tp.matches(shown, seen), f"$ {s.text}\n--- got:\n{got[i]}"


def test_pages_mark_their_blocks() -> None:
    for page in (ACCEPT, CI):
        kinds = {s.kind for s in tp.steps(page)}
        assert {"file", "run", "cluster"} <= kinds, (page.name, kinds)
    assert "OUTPUT" not in ACCEPT.read_text() + CI.read_text()


def test_matches_takes_dots_for_any_lines() -> None:
    assert tp.matches(["a", "...", "c"], ["a", "b", "b", "c"])
    assert tp.matches(["a", "...", "c"], ["a", "c"])
    assert not tp.matches(["a", "...", "c"], ["a", "b"])
    assert not tp.matches(["a", "c"], ["a", "b", "c"])
    assert tp.matches(["...", "b", "..."], ["a", "b", "c"])
    assert not tp.matches(["...", "x", "..."], ["a", "b", "c"])


def test_normalize_masks_only_what_depends_on_the_machine() -> None:
    a = tp.normalize(["node1  ok    StreamCheck.every-other-core.copy   +0.0%"], ())
    b = tp.normalize(["node1  ok  StreamCheck.every-other-core.triad  -2.5%"], ())
    assert a == b
    c = tp.normalize(["node1  FAIL  StreamCheck.every-other-core.triad  -2.5%"], ())
    d = tp.normalize(["node2  ok  StreamCheck.every-other-core.triad  -2.5%"], ())
    assert a != c and a != d
    busy = tp.normalize(["stream.compact.add  6,482.6 MB/s  -90%/+inf  2 (4,200.3 .. 8,764.9)"], ())
    quiet = tp.normalize(
        ["stream.compact.add  8,327.4 MB/s  -90%/+100%  2 (7,125.4 .. 9,529.5)"], ()
    )
    assert busy == quiet
    assert tp.normalize(["[ OK ] StreamCheck /3240c69e @vm"], ("vm",)) == tp.normalize(
        ["[ OK ] StreamCheck /0283914c @node2"], ("node2",)
    )


@pytest.mark.slow
def test_accepting_new_nodes_site_check_runs_as_shown(tmp_path: Path) -> None:
    """The part without a cluster: the site file and its check."""
    _check(ACCEPT, set(), tmp_path, _env(), (socket.gethostname().split(".")[0],), 120)


@pytest.mark.slow
def test_reframe_ci_local_part_runs_as_shown(tmp_path: Path, built_kernels: None) -> None:
    _check(CI, {"local"}, tmp_path, _env(), (socket.gethostname().split(".")[0],), 600)


@pytest.mark.slow
@pytest.mark.root
def test_reframe_ci_cluster_part_runs_as_shown(
    tmp_path: Path,
    slurm_cluster3: SlurmCluster,  # noqa: F811
    built_kernels: None,
) -> None:
    env = dict(_env(), TOPOBIND_SLURM_DIR=str(slurm_cluster3.state_dir))
    hosts = (socket.gethostname().split(".")[0], *slurm_cluster3.nodes)
    _check(CI, {"cluster"}, tmp_path, env, hosts, 600)


@pytest.mark.slow
@pytest.mark.root
def test_accepting_new_nodes_cluster_part_runs_as_shown(
    tmp_path: Path,
    slurm_cluster3: SlurmCluster,  # noqa: F811
    built_kernels: None,
) -> None:
    c = slurm_cluster3
    env = dict(_env(), TOPOBIND_SLURM_DIR=str(c.state_dir))
    try:
        _check(ACCEPT, {"cluster"}, tmp_path, env, (socket.gethostname().split(".")[0],), 900)
    finally:  # the page's drain is a dry run; should a node be drained, put it back
        for node in c.nodes:
            c.run(["scontrol", "update", f"nodename={node}", "state=resume"])


def test_srun_waiting_for_a_step_is_not_output_of_the_page() -> None:
    """On a busy machine srun says it waited for the last step's CPUs (the fresh clone's
    three-node tutorial run did): those lines are masked, any other srun line is not."""
    got = [
        "topobind: verify: all 6 threads on their planned CPUs, bound to them",
        "srun: Job 12 step creation temporarily disabled, retrying (Requested nodes are busy)",
        "srun: Step created for job 12",
    ]
    shown = ["topobind: verify: all 6 threads on their planned CPUs, bound to them"]
    assert tp.normalize(got, ()) == tp.normalize(shown, ())
    assert tp.normalize(["srun: error: node2: task 1: Exited with exit code 1"], ()) != []


def test_srun_exit_line_is_compared_in_any_place_of_the_output() -> None:
    """srun's 'task N: Exited' line races with the task's own last lines (a busy machine
    printed it first, the page shows it last): either order matches, nothing else moves."""
    shown = ["topobind: error: no node: section", "node:", "srun: error: node1: task 0: "
             "Exited with exit code 2"]  # fmt: skip
    got = [shown[2], shown[0], shown[1]]
    assert tp.matches(tp.normalize(shown, ()), tp.normalize(got, ()))
    assert not tp.matches(tp.normalize(shown, ()), tp.normalize([shown[1], shown[0], shown[2]], ()))
    assert not tp.matches(tp.normalize(shown, ()), tp.normalize(shown[:2], ()))
