"""Property-based tests (Hypothesis) of the GPU parsers of outside input (issue 37): bus ids
(sysfs names, NVML's and the runtimes' strings), a GPU's sysfs files (``local_cpulist``,
``numa_node``, ``class``), NVIDIA's procfs ``information``, the probe's ``gpu_runtimes``
blocks, and the escaping of what is printed. Settings and budget: tests/fuzzing.py.

Property: a result that agrees with the input or a note, never an exception, a hang or
unbounded output; nothing printed holds a control character."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fuzzing import bounded, fuzz
from hypothesis import given
from hypothesis import strategies as st

from topobind.launch.verify_devices import RUNTIME, Seen, check_env, runtime_row
from topobind.plan.model import PlannedRank
from topobind.topo import gpu_live
from topobind.topo.gpus import bus_id, bus_key, listed, shown
from topobind.topo.topology import parse_list

HOSTILE = st.sampled_from(list("0123456789abcdefABCDEF:.-, \t\n\x00\x1b\x7fg٣１²ÿ") + ["0x"])
hostile_text = st.lists(HOSTILE, max_size=40).map("".join) | st.text(max_size=40)
pytestmark = pytest.mark.slow  # as every fuzz module: make test runs them, test-fast does not

bus_like = st.from_regex(
    r"[0-9a-fA-F]{1,9}:[0-9a-fA-F]{1,3}:[0-9a-fA-F]{1,3}\.[0-9]", fullmatch=True
)


def printable(text: str) -> bool:
    return all(" " <= c <= "~" for c in text)


@fuzz(400)
@given(hostile_text | bus_like)
def test_bus_ids(text: str) -> None:
    got = bus_id(text)
    if got is None:
        return
    domain, bus, rest = got.split(":")
    dev, fn = rest.split(".")
    assert len(domain) >= 4 and (len(bus), len(dev), len(fn)) == (2, 2, 1)
    assert got == got.lower() and printable(got) and bus_id(got) == got
    assert int(domain, 16) == int(text.strip().split(":")[0], 16)
    assert bus_key(got) == tuple(int(x, 16) for x in (domain, bus, dev, fn))


@fuzz(300)
@given(st.text(max_size=200), st.integers(4, 120))
def test_shown_is_printable_and_bounded(text: str, limit: int) -> None:
    got = shown(text, limit)
    assert printable(got) and len(got) <= limit
    if printable(text) and len(text) <= limit:
        assert got == text


@fuzz(100)
@given(st.lists(st.text(alphabet="abc0123", max_size=6), max_size=50), st.integers(1, 10))
def test_listed_names_at_most_limit(items: list[str], limit: int) -> None:
    got = listed(items, limit)
    if len(items) > limit:
        assert got.endswith(f" and {len(items) - limit} more")
    else:
        assert got == ", ".join(items)


# --------------------------------------------------------- a GPU's sysfs and procfs files
def one_gpu(root: Path, **files: str) -> None:
    d = root / "sys" / "bus" / "pci" / "devices" / "0000:41:00.0"
    d.mkdir(parents=True, exist_ok=True)
    drivers = root / "sys" / "bus" / "pci" / "drivers" / "nvidia"
    drivers.mkdir(parents=True, exist_ok=True)
    if not (d / "driver").is_symlink():
        os.symlink(drivers, d / "driver")
    for name, text in files.items():
        (d / name).write_bytes(text.encode("utf-8", "surrogateescape"))


@fuzz(150)
@given(
    cpulist=hostile_text | st.text(alphabet="0123456789-, ", max_size=30),
    numa=hostile_text | st.sampled_from(["0", "-1", "99999999", "1" * 30]),
    cls=st.sampled_from(["0x030200", "0x0302", "030200", "0x030000", "0x0302\x00", "zz"])
    | hostile_text,
    info=hostile_text,
)
def test_sysfs_and_procfs_files_of_a_gpu(
    tmp_path_factory: pytest.TempPathFactory, cpulist: str, numa: str, cls: str, info: str
) -> None:
    root = tmp_path_factory.mktemp("gpu")
    one_gpu(root, local_cpulist=cpulist, numa_node=numa, vendor="0x10de", **{"class": cls})
    proc = root / "proc" / "driver" / "nvidia" / "gpus" / "0000:41:00.0"
    proc.mkdir(parents=True)
    (proc / "information").write_text(f"Model: {info}\nGPU UUID: {info}\n")
    env = {gpu_live.SYSFS_ENV: str(root / "sys"), gpu_live.PROCFS_ENV: str(root / "proc"),
           gpu_live.LIBS_ENV: "0"}  # fmt: skip
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with bounded():
            inv = gpu_live.live_inventory(gpu_live.Inventory(), {0, 1, 2, 3}, {0}, parse_list)
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    assert len(inv.gpus) <= 1 and inv.refusal is None
    for g in inv.gpus:
        assert set(g.pus) <= {0, 1, 2, 3} and set(g.numa) <= {0}
        assert printable(g.model or "") and printable(g.uuid or "")
        try:
            want = set(parse_list(cpulist.strip())) & {0, 1, 2, 3}
        except Exception:  # noqa: BLE001 - a bad list: CPUs unknown, said
            want = set()
            assert g.near in ("unknown", "sysfs")
        if g.near == "sysfs":
            assert set(g.pus) == want
    assert all(printable(n) and len(n) < 600 for n in inv.notes)


# ------------------------------------------------------ the probe's gpu_runtimes blocks
json_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | hostile_text
device = st.fixed_dictionaries(
    {}, optional={"pci": json_leaf | bus_like, "uuid": json_leaf, "error": json_leaf}
)
block = st.fixed_dictionaries(
    {"api": st.sampled_from(["cuda", "hip"]) | json_leaf},
    optional={"loaded": json_leaf, "error": json_leaf, "code": json_leaf, "count": json_leaf,
              "devices": st.lists(device | json_leaf, max_size=5) | json_leaf},
)  # fmt: skip


@fuzz(300)
@given(st.lists(block | json_leaf, max_size=3))
def test_runtime_blocks(blocks: list[object]) -> None:
    planned = [PlannedRank(0, ((0,),), (0,), {"CUDA_VISIBLE_DEVICES": "0"}, ("0000:41:00.0",))]
    params = {"device_env": {"CUDA_VISIBLE_DEVICES": "0"}, "gpu_runtimes": blocks}
    text = json.dumps({"kernel": "whereami", "host": "h", "rank": 0, "params": params})
    with bounded():
        (row,) = [r for r in check_env(planned, text) if r.variable == RUNTIME]
    assert row.verdict in ("OK", "MISMATCH", "UNVERIFIABLE")
    assert printable(row.note) and len(row.note) < 400
    if row.verdict == "OK":  # only when CUDA listed exactly the planned GPU, readable
        seen = [Seen(b) for b in blocks if isinstance(b, dict) and b.get("api") == "cuda"]
        assert seen and [d[0] for d in seen[0].devices] == ["0000:41:00.0"]
        assert not seen[0].error and seen[0].loaded
    one = runtime_row(0, "h", ["0000:41:00.0"], Seen(blocks[0] if blocks else None))
    assert one.verdict in ("OK", "MISMATCH", "UNVERIFIABLE")
