"""One result model, one reader: the schema path (``load_result``: the schema, then the reader)
and the report's path (the reader alone) give the same :class:`Result`, and refuse the same
defects; what ``result_document`` writes reads back as it was."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fleetgen import FleetSpec, generate_fleet

from topobind.errors import TopobindError
from topobind.measure import results
from topobind.measure.results import ResultError, result_document, result_from_document


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, dict[str, Any]]]:
    """Generated results of every kernel, with pages, matrices, a layout and its placement."""
    root = tmp_path_factory.mktemp("reader")
    kernels = ("stream", "dgemm", "hpl", "latency", "c2c", "whereami")
    generate_fleet(
        root / "a", FleetSpec(hosts=2, runs=1, kernels=kernels, pages=("4k", "2M", "1G"))
    )
    generate_fleet(
        root / "b", FleetSpec(hosts=1, runs=1, kernels=("stream", "hpl"), layout="per-l3")
    )
    docs = [(str(f), json.loads(f.read_text())) for f in sorted(root.rglob("*.json"))]
    for f in sorted(root.rglob("*.jsonl")):  # whereami: one document per line
        lines = f.read_text().splitlines()
        docs += [(f"{f}:{i}", json.loads(line)) for i, line in enumerate(lines, 1)]
    source, stream = next((s, d) for s, d in docs if d["kernel"] == "stream")
    pages = {"requested": "1G", "kib": 2048, "fallback": True, "method": "thp", "note": "THP"}
    docs.append((f"{source}(fallback)", stream | {"pages": pages}))
    assert len(docs) >= 20
    return docs


def test_the_schema_path_and_the_reader_give_the_same_result(
    documents: list[tuple[str, dict[str, Any]]],
) -> None:
    kinds = set()
    for source, doc in documents:
        checked = results.parse_result(doc, source)
        read = result_from_document(doc, source)
        assert result_document(checked) == result_document(read), source
        assert (checked.source, read.source) == (source, source)
        kinds.add(checked.kernel)
        if checked.matrices:
            kinds.add("matrices")
        if checked.page_fallback:
            kinds.add("fallback")
        if checked.layout and checked.topology and checked.placement:
            kinds.add("layout")
    assert kinds >= {"stream", "c2c", "whereami", "matrices", "fallback", "layout"}


def test_what_the_writer_writes_reads_back_as_it_was(
    documents: list[tuple[str, dict[str, Any]]],
) -> None:
    for source, doc in documents:
        first = result_from_document(doc, source)
        written = json.loads(json.dumps(result_document(first)))
        again = results.parse_result(written, source)  # valid against the schema too
        assert result_document(again) == result_document(first), source
        assert (again.page_kib, again.page_fallback, again.generated, again.topology) == (
            first.page_kib,
            first.page_fallback,
            first.generated,
            first.topology,
        )


Change = Callable[[dict[str, Any]], object]


def _set(path: str, value: object) -> Change:
    *parents, last = path.split(".")

    def change(doc: dict[str, Any]) -> None:
        where = doc
        for key in parents:
            where = where[key]
        if value is KeyError:
            del where[last]
        else:
            where[last] = value

    return change


# A defect of each field the model holds: the schema refuses it, and so does the reader alone
# (with its own one-line message naming the field).
DEFECTS: list[tuple[str, Change, str]] = [
    ("schema", _set("schema", "topobind.result/2"), '"schema" is'),
    ("kernel", _set("kernel", 7), '"kernel" must be'),
    ("host", _set("host", KeyError), 'missing "host"'),
    ("timestamp", _set("timestamp", "yesterday"), "ISO 8601"),
    ("layout", _set("layout", ["per-l3"]), '"layout" must be'),
    ("tier", _set("tier", "Smoke tier"), '"tier" must be a tier name'),
    ("tier type", _set("tier", 1), '"tier" must be a tier name'),
    ("tier length", _set("tier", "q" * 33), '"tier" must be a tier name'),
    ("pages", _set("pages", "2M"), '"pages" must be'),
    ("pages.kib", _set("pages.kib", 0), '"pages.kib" must be a positive integer'),
    ("pages.note", _set("pages.note", KeyError), 'missing "pages.note"'),
    ("pages.fallback", _set("pages.fallback", "no"), '"pages.fallback" must be true or false'),
    ("metrics", _set("metrics", []), '"metrics" must be an object'),
    ("trials", _set("metrics.triad.trials", []), 'non-empty "trials"'),
    ("trial", _set("metrics.triad.trials", [1.0, "2"]), '"trials" must be numbers'),
    ("metric unit", _set("metrics.triad.unit", KeyError), 'missing "metrics.triad.unit"'),
    ("best", _set("metrics.triad.best", None), '"metrics.triad.best" must be a number'),
    ("headline", _set("headline", "fast"), '"headline" must be an object'),
    ("headline.metric", _set("headline.metric", ""), '"headline.metric"'),
    ("headline.stat", _set("headline.stat", 1), '"headline.stat" must be'),
    ("headline.value", _set("headline.value", "12"), '"headline.value" must be a number'),
    ("valid", _set("valid", "yes"), '"valid" must be true or false'),
]


@pytest.mark.parametrize(("field", "change", "needle"), DEFECTS, ids=[d[0] for d in DEFECTS])
def test_the_reader_refuses_what_the_schema_refuses(
    documents: list[tuple[str, dict[str, Any]]], field: str, change: Change, needle: str
) -> None:
    source, good = next((s, d) for s, d in documents if d["kernel"] == "stream" and d["pages"])
    doc = copy.deepcopy(good)
    change(doc)
    with pytest.raises(TopobindError, match="not a valid topobind.result/1 document"):
        results.validate_result_document(doc, source)
    with pytest.raises(ResultError) as exc:
        result_from_document(doc, source)
    assert needle in str(exc.value) and "\n" not in str(exc.value), str(exc.value)


def test_a_headline_unit_that_is_not_its_metrics_is_refused(
    documents: list[tuple[str, dict[str, Any]]],
) -> None:
    """What the schema cannot say, the reader checks on both paths."""
    source, good = next((s, d) for s, d in documents if d["kernel"] == "stream")
    doc = copy.deepcopy(good)
    doc["headline"]["unit"] = "GB/s"
    msg = '"headline.unit" "GB/s" differs from the unit of metric "triad" ("MB/s")'
    with pytest.raises(ResultError, match=re.escape(msg)):
        result_from_document(doc, source)
    with pytest.raises(TopobindError, match=re.escape(f"{source}: {msg}")):
        results.parse_result(doc, source)


def test_a_layout_that_cannot_be_drawn_is_still_read(
    documents: list[tuple[str, dict[str, Any]]], tmp_path: Path
) -> None:
    """The report's leniency, in the reader: a placement or a rank count not as documented
    leaves () or None there (the report says it cannot draw that layout); the schema path
    refuses such a file."""
    source, good = next((s, d) for s, d in documents if d["layout"] and d["placement"])
    doc = copy.deepcopy(good) | {"placement": [{"rank": 0}], "ranks": None}
    read = result_from_document(doc, source)
    assert (
        read.placement == ()
        and read.ranks is None
        and read.headline == (result_from_document(good, source).headline)
    )
    with pytest.raises(TopobindError, match="not a valid"):
        results.parse_result(doc, source)


def test_a_tier_reads_back_and_says_whether_it_measures(
    documents: list[tuple[str, dict[str, Any]]],
) -> None:
    """Issue 47 item 6: a result carries its check's tier; smoke measures no performance."""
    source, good = next((s, d) for s, d in documents if d["kernel"] == "stream")
    assert "tier" not in good and result_from_document(good, source).measures_performance
    for tier, measures in (("smoke", False), ("quick", True), ("full", True), ("x-1", False)):
        doc = copy.deepcopy(good)
        doc["tier"] = tier
        results.validate_result_document(doc, source)
        r = result_from_document(doc, source)
        assert (r.tier, r.measures_performance) == (tier, measures)
        written = result_document(r)
        assert list(written)[5:7] == ["tier", "ranks"]  # the C kernels' order
        assert result_from_document(written, source).tier == tier
