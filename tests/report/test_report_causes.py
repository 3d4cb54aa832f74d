"""The fleet report names each slow host's cause (issue 45 item 2): measure/causes.py on
the host's runs' evidence against the other hosts' of its group; results without an
``evidence`` section say so ("unknown (no evidence: ...)")."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from topobind.measure import stats
from topobind.report.analysis import HostStats, _with_causes


def _host(name: str, slow: bool, evidence: list[Any]) -> HostStats:
    runs = tuple(SimpleNamespace(evidence_document=e) for e in evidence)
    return HostStats(host=name, summary=stats.summarize([1.0, 1.0, 1.0], True), runs=runs,  # type: ignore[arg-type]
                     warmup_runs=(), worse_pct=30.0 if slow else 0.0, slowdown=0.0, mads=None,
                     slow=slow)  # fmt: skip


def _ev(steal: float) -> dict[str, Any]:
    return {"version": 1, "window_s": 1.0, "signals": {"steal_share": steal}}


def test_a_slow_hosts_row_names_its_cause_and_the_others_none() -> None:
    hosts = [_host(f"n{i}", False, [_ev(0.0)] * 3) for i in range(3)]
    hosts.append(_host("n9", True, [_ev(0.4), _ev(0.5), _ev(0.45)]))
    got = {h.host: h.cause for h in _with_causes(hosts, 0.05)}
    assert got["n9"] == "stolen (hypervisor steal 45% of its CPUs; fleet: none)"
    assert {got[f"n{i}"] for i in range(3)} == {""}


def test_results_without_evidence_say_unknown() -> None:
    hosts = [_host(f"n{i}", i == 3, [None] * 3) for i in range(4)]
    (slow,) = [h for h in _with_causes(hosts, 0.05) if h.slow]
    assert slow.cause == "unknown (no evidence: the results carry no evidence section)"


def test_the_report_document_carries_each_slow_hosts_cause(tmp_path: Any) -> None:
    from fleetgen import FleetSpec, generate_fleet, parse_slow

    from topobind.report import analysis, document, reader

    spec = FleetSpec(hosts=5, runs=3, kernels=("stream",), slow=parse_slow("gen-node0002:1.30"))
    generate_fleet(tmp_path, spec)
    read = reader.read_results([tmp_path])
    report = analysis.analyse(read.runs, analysis.Options(), read.inputs, read.files)
    (slow,) = document.report_json(report)["slow_hosts"]
    assert slow["host"] == "gen-node0002"
    assert slow["cause"] == "unknown (no evidence: the results carry no evidence section)"
