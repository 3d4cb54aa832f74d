"""The cause engine (measure/causes.py, issue 45 item 2) on result documents carrying the
``evidence`` section (fixtures in the format agreed with the evidence branch): a cause is
named only outside the fleet's range by the figures' noise rule, several are ranked, none
is "unexplained", no evidence is "unknown (no evidence: REASON)", and hostile sections
never raise."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from topobind.measure import causes, stats

NODES = ("node1", "node2", "node3", "node4")


def doc(**signals: Any) -> dict[str, Any]:
    extra = {k: signals.pop(k) for k in ("counters", "links", "gpu_throttle") if k in signals}
    return {"schema": "topobind.result/1", "kernel": "stream",
            "evidence": {"version": 1, "window_s": 2.0, "cpus": [0, 1],
                         "signals": signals, "unavailable": {}, **extra}}  # fmt: skip


def runs_of(per_node: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, float]]]:
    return {n: [causes.signals_of(d)[0] for d in ds] for n, ds in per_node.items()}


def quiet(n: int = 3, **over: Any) -> list[dict[str, Any]]:
    base = {"throttled_share": 0.0, "busy_share": 0.01, "steal_share": 0.0,
            "interrupts_on_cpus": 2000, "swap_pages": 0}  # fmt: skip
    return [doc(**{**base, **over}) for _ in range(n)]


def test_a_node_under_a_cgroup_quota_is_throttled_with_its_figure_and_the_fleets() -> None:
    runs = runs_of({"node1": quiet(), "node2": quiet(), "node4": quiet(),
                    "node3": quiet(throttled_share=0.74, quota_cpus=0.25)})  # fmt: skip
    got = causes.explain("node3", runs, 0.05)
    assert [c.name for c in got.causes] == ["throttled"]
    assert got.text == ("throttled (cgroup quota 0.25 CPUs, throttled 74% of the run; fleet: "
                        "no quota, none)")  # fmt: skip
    assert got.label == "throttled"
    for other in ("node1", "node2", "node4"):
        assert causes.explain(other, runs, 0.05).text == causes.UNEXPLAINED


def test_several_causes_are_ranked_by_how_far_outside_they_lie() -> None:
    runs = runs_of({"node1": quiet(), "node2": quiet(), "node3": quiet(),
                    "node4": quiet(busy_share=0.3, steal_share=0.9)})  # fmt: skip
    got = causes.explain("node4", runs, 0.05)
    assert [c.name for c in got.causes] == ["stolen", "busy"]
    assert got.text.startswith("stolen (hypervisor steal 90% of its CPUs; fleet: none); busy ")


def test_a_signal_inside_the_fleets_noise_names_nothing() -> None:
    """Interrupts scattering 40 % run to run on every node: node4's +30 % is noise."""
    noisy = {n: [doc(interrupts_on_cpus=v) for v in (2000, 3500, 1500)] for n in NODES[:3]}
    noisy["node4"] = [doc(interrupts_on_cpus=v) for v in (2600, 4500, 2000)]
    runs = runs_of(noisy)
    assert stats.noise_floor({n: [v["interrupts_on_cpus"] for v in rs]
                              for n, rs in runs.items()}) > 0.3  # fmt: skip
    assert causes.explain("node4", runs, 0.05).text == causes.UNEXPLAINED


def test_the_sign_test_needs_the_runs_beyond_not_one_burst() -> None:
    """One run of three busy (a burst) is not a cause: 1 of 3 beyond is no confidence."""
    runs = runs_of({"node1": quiet(), "node2": quiet(), "node3": quiet(),
                    "node4": [*quiet(2), doc(busy_share=0.9)]})  # fmt: skip
    assert causes.explain("node4", runs, 0.05).text == causes.UNEXPLAINED


def test_too_few_nodes_or_runs_is_said_not_guessed() -> None:
    runs = runs_of({"node1": quiet(), "node2": quiet(busy_share=0.9)})
    assert causes.explain("node2", runs, 0.05).text.startswith("not judged: fewer than 3 nodes")


def test_a_node_without_evidence_is_unknown_with_the_reason() -> None:
    runs = runs_of({"node1": quiet(), "node2": quiet(), "node3": quiet()})
    runs["node4"] = [{}]
    got = causes.explain("node4", runs, 0.05, "the result document has no evidence section")
    assert got.text == "unknown (no evidence: the result document has no evidence section)"
    assert got.label == "unknown"


def test_counts_are_compared_a_second_and_counters_and_devices_count() -> None:
    d = doc(interrupts_on_cpus=5000, swap_pages=10,
            counters={"available": True, "events": {"l2_lines_in": 7e9},
                      "dram_bytes": {"read": 3e10, "write": 1e10}},
            links=[{"device": "0000:3b:00.0", "kind": "gpu", "degraded": True},
                   {"device": "0000:5e:00.0", "kind": "nic", "degraded": False}],
            gpu_throttle=[{"index": 0, "reasons": ["gpu_idle"]},
                          {"index": 1, "reasons": ["hw_slowdown"]}])  # fmt: skip
    got, why = causes.signals_of(d)
    assert why == ""
    assert got["interrupts_on_cpus"] == 2500 and got["swap_pages"] == 5
    assert got["l2_lines_in"] == 7e9 and got["dram_bytes"] == 4e10
    assert got["links_degraded"] == 1 and got["gpus_throttled"] == 1


def test_a_degraded_link_is_named() -> None:
    link = {"device": "0000:3b:00.0", "kind": "gpu", "degraded": False}
    per = {n: [doc(links=[link]) for _ in range(3)] for n in NODES[:3]}
    per["node4"] = [doc(links=[{**link, "degraded": True}]) for _ in range(3)]
    got = causes.explain("node4", runs_of(per), 0.05)
    assert got.text == "link degraded (1 PCIe link(s) below their width or speed; fleet: none)"


def test_mccalpins_l2_fills_name_memory_traffic() -> None:
    """McCalpin's slow nodes: 1.5-2x the L2 fills of the fast ones."""

    def run(lines: float) -> dict[str, Any]:
        return doc(counters={"available": True, "events": {"l2_lines_in": lines}})

    per = {n: [run(4.0e9), run(4.1e9), run(3.9e9)] for n in NODES[:3]}
    per["node4"] = [run(7.0e9), run(7.5e9), run(6.8e9)]
    got = causes.explain("node4", runs_of(per), 0.05)
    assert got.text == "memory traffic (L2 lines in 7e+09 a run; fleet: 4e+09)"


@pytest.mark.parametrize("evidence", [
    None, "x", [], {"version": 2}, {"version": 1}, {"version": 1, "signals": "x"},
    {"version": 1, "window_s": 0, "signals": {"interrupts_on_cpus": 5}},
    {"version": 1, "window_s": 1e-320, "signals": {"interrupts_on_cpus": 1e300}},
    {"version": 1, "window_s": 1, "signals": {"busy_share": math.inf, "steal_share": -1,
                                               "throttled_share": True, "swap_pages": "9"}},
    {"version": 1, "signals": {}, "unavailable": {"busy_share": "no /proc/stat"}},
    {"version": 1, "counters": {"available": True, "events": [], "dram_bytes": {"read": 1}}},
    {"version": 1, "links": [1, None, {"degraded": "yes"}], "gpu_throttle": [{"reasons": 3}]},
])  # fmt: skip
def test_a_hostile_section_never_raises(evidence: Any) -> None:
    document = {"schema": "topobind.result/1"} if evidence is None else {"evidence": evidence}
    got, why = causes.signals_of(document)
    assert all(math.isfinite(v) and v >= 0 for v in got.values())
    assert got or why
    if evidence == {"version": 1, "signals": {}, "unavailable": {"busy_share": "no /proc/stat"}}:
        assert why == "no /proc/stat"


def test_the_figures_rule_is_the_one_rule() -> None:
    """measure/stats.outliers is what validation/verdict.py judges figures with."""
    from topobind.validation import verdict

    assert verdict.NAME_CONFIDENCE == stats.NAME_CONFIDENCE
    assert verdict.noise_floor is stats.noise_floor


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=20), kids,
                                                               max_size=5),
    max_leaves=30,
)  # fmt: skip
_keys = st.sampled_from(["version", "window_s", "signals", "counters", "links",
                         "gpu_throttle", "unavailable", *causes.BY_KEY])  # fmt: skip


@fuzz(200)
@given(st.dictionaries(_keys, _json | st.just(1), max_size=8), st.integers(1, 4))
def test_any_evidence_section_gives_finite_signals_or_a_reason(ev: dict[str, Any],
                                                               runs: int) -> None:  # fmt: skip
    got, why = causes.signals_of({"evidence": ev})
    assert all(math.isfinite(v) and v >= 0 for v in got.values())
    assert got or why
    fleet = {n: [got] * runs for n in NODES}
    text = causes.explain("node1", fleet, 0.05, why).text
    assert text and "\n" not in text


def test_the_guests_remote_memory_run_is_named_memory_off_node() -> None:
    """Issue 45 item 5: real result documents of the 4-NUMA QEMU guest (tests/data/numa_vm/
    evidence, README there): STREAM on node 0's CPUs, memory bound to node 0 or to node 3.
    A node whose runs read like the remote one, among nodes whose runs read like the local
    ones, is named memory off-node with its share; the local ones get no cause."""
    from paths import DATA

    def doc(name: str) -> dict[str, float]:
        text = (DATA / "numa_vm" / "evidence" / f"{name}.json").read_text()
        signals, why = causes.signals_of(json.loads(text))
        assert signals, why
        return signals

    local = [doc("membind-local-1"), doc("membind-local-2")]
    remote = doc("membind-remote")
    runs = {f"node{i}": [local[0], local[1], local[0]] for i in (1, 2, 4)}
    runs["node3"] = [remote, remote, remote]
    got = causes.explain("node3", runs, 0.05)
    assert "memory off-node" in [c.name for c in got.causes], got.text
    assert "memory off-node" in got.text and "fleet" in got.text, got.text
    for other in ("node1", "node2", "node4"):
        assert "memory off-node" not in causes.explain(other, runs, 0.05).text


def test_explain_each_is_explain_for_every_node_with_the_rule_once_a_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The report names the causes of every slow host of a fleet: one outlier computation a
    signal for all of them (was one a host: 38 s at 5,000 hosts), the same explanations."""
    runs = runs_of({"node1": quiet(), "node2": quiet(), "node4": quiet(),
                    "node3": quiet(throttled_share=0.74, quota_cpus=0.25),
                    "node5": quiet(busy_share=0.6)})  # fmt: skip
    runs["node6"] = []
    nodes = ["node1", "node3", "node5", "node6"]
    calls = []
    real = stats.outliers

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(stats, "outliers", counted)
    each = causes.explain_each(nodes, runs, 0.05, {"node6": "none recorded"})
    assert 0 < len(calls) <= len(causes.SIGNALS)
    monkeypatch.undo()
    for n in nodes:
        why = "none recorded" if n == "node6" else ""
        assert each[n] == causes.explain(n, runs, 0.05, why), n
    assert each["node6"].text == "unknown (no evidence: none recorded)"
