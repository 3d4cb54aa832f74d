"""The Python reader of a result's ``evidence`` (measure/evidence.py): the recorded-hardware
fixture (tests/data/result_evidence_x86.json, the documented format with an x86 node's event
names), the schema, malformed sections (None and a reason, never an exception), the bounds,
the Result model's round trip and the console line."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from paths import DATA

from topobind.errors import TopobindError
from topobind.measure.evidence import (
    HARDWARE_COUNTERS,
    MAX_ENTRIES,
    evidence_line,
    evidence_of,
    read_evidence,
)
from topobind.measure.results import (
    load_result,
    result_document,
    result_from_document,
    validate_result_document,
)

FIXTURE = DATA / "result_evidence_x86.json"


def fixture() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def test_the_recorded_hardware_readings_are_read_with_every_x86_counter() -> None:
    ev = load_result(FIXTURE).evidence  # the schema first, then the reader
    assert ev is not None and ev.counters_available and ev.why == ""
    assert ev.hardware_counters == HARDWARE_COUNTERS
    assert ev.counters.pmu == "cpu"
    assert ev.counter("l2_lines_in") == 5403992112
    assert ev.counter("dram_read") == 345875447808 and ev.counter("dram_write") == 115291815936
    assert ev.signal("effective_clock_ratio") == 1.12
    assert ev.signal("quota_cpus") is None and ev.reason("quota_cpus") is None  # unlimited
    assert not any(link.degraded for link in ev.links)


def test_a_software_only_section_says_why_on_the_console() -> None:
    doc = fixture()
    counters = doc["evidence"]["counters"]
    why = "no hardware PMU (a VM without a virtual PMU?): hardware events not supported (ENOENT)"
    counters["events"] = {"context_switches": 3, "cpu_migrations": 0, "page_faults": 9}
    counters["missing"] = {
        n: "perf_event_open: No such file or directory (ENOENT)" for n in HARDWARE_COUNTERS
    }
    counters |= {"why": why, "pmu": ""}
    del counters["dram_bytes"]
    validate_result_document(doc, "doc")
    ev = evidence_of(doc)
    assert ev is not None and ev.counters_available and ev.hardware_counters == ()
    assert ev.reason("cycles").endswith("(ENOENT)")
    line = evidence_line(ev)
    assert line.startswith("evidence: busy 0 %, steal 0 %, throttled 0 %, counters: software only")
    assert why in line


def test_the_console_line_names_a_quota_and_a_degraded_link() -> None:
    doc = fixture()
    doc["evidence"]["signals"] |= {"quota_cpus": 0.25, "throttled_share": 0.74}
    doc["evidence"]["links"][0] |= {"width": 8, "degraded": True}
    line = evidence_line(evidence_of(doc))
    assert "throttled 74 %, quota 0.25 CPUs, link degraded: 0000:3b:00.0" in line
    assert "counters: hardware (cycles, ref_cycles" in line


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda e: e.update(version=2), "evidence.version is 2, expected 1"),
        (lambda e: e["signals"].update(busy_share="high"), "busy_share must be a finite number"),
        (lambda e: e["signals"].update(numa_miss=-1), "numa_miss must not be negative"),
        (lambda e: e.update(cpus=[0, "1"]), "evidence.cpus must list CPU numbers"),
        (lambda e: e["counters"].update(available="yes"), "available must be true or false"),
        (lambda e: e.pop("counters"), "evidence has no counters object"),
        (lambda e: e["links"][0].update(width=8.5), "width and max_width must be integers"),
        (lambda e: e["unavailable"].update(x=1), "evidence.unavailable.x must be a string"),
        (lambda e: e.update(signals=[1]), "evidence.signals must be an object"),
    ],
)
def test_a_malformed_section_is_none_with_its_reason(change: Any, reason: str) -> None:
    doc = fixture()
    change(doc["evidence"])
    got = read_evidence(doc)
    assert got.evidence is None and reason in got.reason
    assert got.reason.startswith("evidence not as documented: ")
    assert result_from_document(doc).evidence is None  # the result itself is still read
    with pytest.raises(TopobindError):
        validate_result_document(doc, "doc")  # the schema refuses it too


def test_absent_and_bounded() -> None:
    doc = fixture()
    del doc["evidence"]
    assert read_evidence(doc).reason.startswith("no evidence in the result")
    assert read_evidence("text").reason == "not a JSON object"
    big = fixture()
    big["evidence"]["signals"] = {f"s{i}": 0 for i in range(MAX_ENTRIES + 1)}
    assert f"more than {MAX_ENTRIES}" in read_evidence(big).reason
    long = fixture()
    long["evidence"]["unavailable"] = {"clock_mhz": "x" * 10_000}
    assert len(evidence_of(long).reason("clock_mhz")) == 300


def test_the_result_model_writes_the_section_back_as_read() -> None:
    doc = fixture()
    again = result_document(result_from_document(copy.deepcopy(doc)))
    assert again["evidence"] == doc["evidence"]
    assert list(again)[-3:] == ["evidence", "valid", "validation"]  # as the kernels write it
