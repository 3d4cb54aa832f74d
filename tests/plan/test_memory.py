"""Memory in the plan (--mem, --pages, --pages-min): each rank's policy, NUMA nodes and page
size, the pools they are checked against (a prepared /sys tree with two NUMA nodes, and this
machine's own), the outputs that show them, the numactl wrapper and the bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, run_topobind
from paths import RANKSTEP_BIN, REPO
from plans import plan_of

from topobind.cli.commands.common import size_arg
from topobind.emit.memory import numactl_script, srun_mem_bind
from topobind.errors import PlanError, TopobindError
from topobind.plan.memory import is_static, needs_step, plan_memory, step_fields
from topobind.plan.model import validate_plan_json
from topobind.topo.memory_state import read_state, state_lines
from topobind.topo.topology import load

BETZY = "betzy-epyc7742"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_topobind(*args, env=NO_SLURM, timeout=120)


def fake_sys(root: Path, nodes: dict[int, dict[int, tuple[int, int]]]) -> str:
    """A /sys and /proc tree: node -> {size_kib: (free, total)}."""
    for node, pools in nodes.items():
        for kib, (free, total) in pools.items():
            d = root / f"sys/devices/system/node/node{node}/hugepages/hugepages-{kib}kB"
            d.mkdir(parents=True)
            (d / "free_hugepages").write_text(f"{free}\n")
            (d / "nr_hugepages").write_text(f"{total}\n")
            (root / f"sys/kernel/mm/hugepages/hugepages-{kib}kB").mkdir(parents=True, exist_ok=True)
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/numa_balancing").write_text("1\n")
    return str(root)


def two_node_plan() -> object:
    """2 ranks, one per NUMA node of a 2-node machine, as if it were this machine (live)."""
    topo = load("synthetic:pack:2 numa:1 l3:1 core:2 pu:1")
    plan = plan_of(topo.replace(source="live (test)"), "per-numa")
    assert [r.numa for r in plan.ranks] == [(0,), (1,)]
    return plan


def test_local_binds_one_node_and_interleaves_over_several() -> None:
    topo = load(BETZY)
    per_numa = plan_memory(plan_of(topo, "per-numa"))
    per_socket = plan_memory(plan_of(topo, "per-socket"))
    assert [(r.memory.policy, r.memory.nodes) for r in per_numa.ranks] == [
        ("bind", (n,)) for n in range(8)
    ]
    assert [(r.memory.policy, r.memory.nodes) for r in per_socket.ranks] == [
        ("interleave", (0, 1, 2, 3)),
        ("interleave", (4, 5, 6, 7)),
    ]
    for mem in ("bind", "interleave", "preferred"):
        p = plan_memory(plan_of(topo, "per-socket"), mem)
        assert {(r.memory.policy, r.memory.nodes[0]) for r in p.ranks} == {(mem, 0), (mem, 4)}
    none = plan_memory(plan_of(topo, "per-socket"), "none")
    assert {(r.memory.policy, r.memory.nodes) for r in none.ranks} == {("none", ())}
    assert needs_step(per_socket) and not needs_step(none)


@pytest.mark.slow
def test_json_text_picture_show_memory() -> None:
    doc = json.loads(cli("plan", "-t", BETZY, "--layout", "per-socket", "-f", "json").stdout)
    validate_plan_json(doc)
    assert doc["ranks"][1]["memory"] == {
        "policy": "interleave",
        "nodes": [4, 5, 6, 7],
        "pages": "thp",
    }
    text = cli("plan", "-t", BETZY, "--layout", "per-numa", "--mem", "preferred").stdout
    assert "memory" in text.splitlines()[2]
    assert "   7  " in text and "preferred 7 thp" in text
    pic = cli("plan", "-t", BETZY, "--layout", "per-socket", "-f", "picture", "--pages", "2M")
    assert "memory: rank 0 interleave 0-3 2M; rank 1 interleave 4-7 2M" in pic.stdout
    assert "pools not checked" in pic.stderr
    draw = cli("draw", "-t", BETZY, "--layout", "per-socket", "--format", "text", "--mem", "bind")
    assert "NUMA 4-7; memory bind 4-7 thp" in draw.stdout


@pytest.mark.slow
def test_srun_mem_bind_and_what_it_cannot_say() -> None:
    topo = load(BETZY)
    flag, note = srun_mem_bind(plan_memory(plan_of(topo, "per-numa")))
    assert flag == "--mem-bind=map_mem:0,1,2,3,4,5,6,7" and note is None
    flag, _ = srun_mem_bind(plan_memory(plan_of(topo, "per-socket"), "bind"))
    assert flag == "--mem-bind=mask_mem:0xf,0xf0"
    flag, note = srun_mem_bind(plan_memory(plan_of(topo, "per-socket")))
    assert flag is None and note and "cannot interleave" in note
    out = cli("plan", "-t", BETZY, "--layout", "per-numa", "-f", "srun")
    assert out.stdout.split()[-1] == "--mem-bind=map_mem:0,1,2,3,4,5,6,7"


@pytest.mark.slow
def test_numactl_wrapper_places_a_real_process(tmp_path: Path) -> None:
    script = numactl_script(plan_memory(plan_of(load("live"), "compact", ranks=1, threads=1)))
    assert "exec numactl --physcpubind=0 --membind=0 --" in script
    path = tmp_path / "numa.sh"
    path.write_text(script)
    done = subprocess.run(
        ["sh", str(path), "cat", "/proc/self/numa_maps"],
        capture_output=True,
        text=True,
        env={**NO_SLURM, "SLURM_LOCALID": "0"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert " bind:0 " in done.stdout
    betzy = numactl_script(plan_memory(plan_of(load(BETZY), "per-socket")))
    assert "1) exec numactl --physcpubind=64-127 --interleave=4-7 --" in betzy


def test_pools_checked_per_node_with_the_command_that_fixes_them(tmp_path: Path) -> None:
    root = fake_sys(tmp_path, {0: {2048: (300, 300), 1 << 20: (1, 1)}, 1: {2048: (10, 10)}})
    plan = two_node_plan()
    ok = plan_memory(plan, "bind", "2M", 10 << 20, root=root)
    assert {r.memory.pages for r in ok.ranks} == {"2M"}
    assert any("numa_balancing is 1" in n for n in ok.notes)
    with pytest.raises(TopobindError) as exc:
        plan_memory(plan, "bind", "2M", 100 << 20, root=root)
    msg = str(exc.value)
    assert "NUMA node 1 has 10 free 2M pages, the plan needs 50 there" in msg
    assert "echo 50 > /sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages" in msg
    # auto: 1G only on node 0 -> 2M, which both nodes hold; nothing fits -> thp with a note
    assert {
        r.memory.pages for r in plan_memory(plan, "bind", "auto", 8 << 20, root=root).ranks
    } == {"2M"}
    big = plan_memory(plan, "bind", "auto", 1 << 30, root=root)
    assert {r.memory.pages for r in big.ranks} == {"thp"}
    assert any("no hugetlb pool holds" in n for n in big.notes)
    # preferred / none: every node's pool together
    assert plan_memory(plan, "preferred", "2M", 300 << 20, root=root).ranks[0].memory.pages == "2M"
    no_1g = fake_sys(tmp_path / "b", {0: {2048: (1, 1)}, 1: {2048: (1, 1)}})
    with pytest.raises(TopobindError, match="no 1G page pool .* hugepagesz=1G"):
        plan_memory(plan, "bind", "1G", root=no_1g)


@pytest.mark.slow
def test_confounders_read_from_a_tree(tmp_path: Path) -> None:
    root = Path(fake_sys(tmp_path, {0: {2048: (3, 4)}, 1: {2048: (0, 4)}}))
    thp = root / "sys/kernel/mm/transparent_hugepage"
    thp.mkdir(parents=True)
    (thp / "enabled").write_text("always madvise [never]\n")
    (thp / "defrag").write_text("[always] defer madvise never\n")
    lines = state_lines(read_state(str(root)))
    assert lines[0] == (
        "memory: kernel.numa_balancing 1, THP never (defrag always), vm.zone_reclaim_mode unknown"
    )
    assert lines[1:] == [
        "  NUMA node 0 hugepages free/total: 2M 3/4",
        "  NUMA node 1 hugepages free/total: 2M 0/4",
    ]
    show = cli("show")
    assert "memory: kernel.numa_balancing " in show.stdout
    assert "hugepages free/total" in show.stdout
    assert "hugepages" in json.loads(cli("show", "-f", "json").stdout)["memory"]


@pytest.mark.slow
def test_step_fields() -> None:
    plan = plan_memory(plan_of(load(BETZY), "per-socket"), "preferred", "2M")
    assert step_fields(plan, plan.ranks[1], "/k/libtbhugepages.so") == [
        "%mem=preferred:4-7",
        "%preload=/k/libtbhugepages.so",
        "TOPOBIND_HUGE_PAGES=2M",
        "TOPOBIND_HUGE_VERBOSE=1",
    ]
    four = plan_memory(plan_of(load(BETZY), "per-numa"), "bind", "4k")
    assert step_fields(four, four.ranks[3], None) == ["%mem=bind:3", "%thp=off"]
    # one NUMA node and the kernel's pages: nothing to apply, no step needed
    one = plan_memory(plan_of(load("synthetic:pack:1 core:2 pu:1"), "compact"))
    assert not needs_step(one) and step_fields(one, one.ranks[0], None) == []


@pytest.mark.skipif(not (RANKSTEP_BIN / "rankexec").exists(), reason="run 'make kernels' first")
def test_sizes_and_static_programs() -> None:
    assert size_arg("512M") == 512 << 20 and size_arg("4GiB") == 4 << 30 and size_arg("7") == 7
    for bad in ("", "0", "x1G", "1P", "9" * 20, "²G", "٣M"):  # Unicode digits: int() takes them
        with pytest.raises(Exception, match="not a size"):
            size_arg(bad)
    assert is_static(str(RANKSTEP_BIN / "rankexec"))  # built with -static
    assert not is_static("/bin/true") and not is_static(str(REPO / "scripts/local-slurm"))


@pytest.mark.slow
def test_no_numa_information(tmp_path: Path) -> None:
    xml = tmp_path / "nonuma.xml"
    text = subprocess.run(
        ["lstopo-no-graphics", "--of", "xml", "-i", "pack:1 core:2 pu:1", "-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    import re

    text = re.sub(r'<object type="NUMANode"[^>]*/>', "", text)
    xml.write_text(re.sub(r'<object type="NUMANode".*?</object>', "", text, flags=re.S))
    topo = load(str(xml))
    assert not topo.numa_nodes
    plan = plan_memory(plan_of(topo, "compact"))  # default local: the kernel's, with a note
    assert {r.memory.policy for r in plan.ranks} == {"none"}
    with pytest.raises(PlanError, match="no NUMA information"):
        plan_memory(plan_of(topo, "compact"), "bind")
    out = cli("plan", "-t", str(xml), "--layout", "compact", "--mem", "bind")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "has no NUMA information" in out.stderr
    # issue 31 item 8: NUMA nodes for some CPUs only; the default plans, with a note
    half = tmp_path / "halfnuma.xml"
    two = subprocess.run(
        ["lstopo-no-graphics", "--of", "xml", "-i", "pack:2 numa:1 core:2 pu:1", "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    last = list(re.finditer(r'<object type="NUMANode"[^>]*?(/>|>.*?</object>)', two, re.S))[-1]
    half.write_text(two[: last.start()] + two[last.end() :])
    out = cli("plan", "-t", str(half), "--layout", "spread", "--ranks", "2", "-f", "json")
    assert out.returncode == 0, out.stderr
    mem = [r["memory"]["policy"] for r in json.loads(out.stdout)["ranks"]]
    assert mem == ["bind", "none"]
    assert "no NUMA node for the CPUs of rank 1" in out.stderr
    out = cli("plan", "-t", str(half), "--layout", "spread", "--ranks", "2", "--mem", "bind")
    assert out.returncode == 2 and "no NUMA information for rank 1" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["-t", BETZY, "--layout", "per-numa", "--mem", "bind"], "NUMA node 1, which this host"),
        (["--ranks", "1", "--threads", "1", "--pages", "1G"], "1G pages"),
        (["--mem", "sideways"], "invalid choice"),
        (["--pages-min", "lots"], "not a size"),
    ],
)
def test_bad_input_one_line(args: list[str], says: str) -> None:
    from topobind.measure.hugepages import reserve_hugepages

    with reserve_hugepages(1 << 20, 0) if os.geteuid() == 0 else _nothing():
        out = cli("run", "--launcher", "none", *args, "--", "true")
    assert out.returncode == 2 and out.stdout == ""
    assert says in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2  # argparse: usage + one line


def _nothing() -> object:
    import contextlib

    return contextlib.nullcontext()
