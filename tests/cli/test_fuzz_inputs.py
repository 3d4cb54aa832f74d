"""Property-based tests (Hypothesis) of every parser of outside input, in process: Slurm
variables and ``scontrol`` output, CPU lists, hwloc bitmaps, hwloc XML (attributes and
structure, by mutating the shipped XMLs), synthetic descriptions, probe and sample JSON,
result documents and site YAML.

Property: a result that agrees with the input, or the module's error type; never another
exception, never a hang (:func:`fuzzing.bounded`). Settings and budget: tests/fuzzing.py."""

from __future__ import annotations

import contextlib
import json
import math
import re
import shutil
from typing import Any
from unittest import mock

import pytest
from fuzzing import bounded, fuzz
from hypothesis import assume, given
from hypothesis import strategies as st
from paths import DATA, REPO, TOPOLOGIES
from plans import plan_of

from topobind.errors import TopobindError
from topobind.inputs import host_name, whole_number
from topobind.launch.samples import judged_threads, read_sample_files
from topobind.launch.verify import parse_probe_output
from topobind.launch.verify_devices import probe_envs
from topobind.measure.results import MAX_VALUE, ResultError, result_from_document
from topobind.report.analysis import Options, analyse
from topobind.topo import slurm_allocation as slurm
from topobind.topo.bitmap import MAX_OS_INDEX, parse_hwloc_bitmap
from topobind.topo.topology import (
    MAX_PUS,
    Topology,
    _check_synthetic_size,
    format_list,
    parse_list,
    parse_xml,
)
from topobind.validation.sites.loading import load_site_file

pytestmark = pytest.mark.slow


# --------------------------------------------------------------------------- strategies
#: characters hostile input is made of: digits of other scripts, signs, separators, controls
HOSTILE_CHARS = st.sampled_from(list("0123456789-,()x \t\n²٣߁１+_.eE:abcf\x00") + ["0x"])
hostile_text = st.lists(HOSTILE_CHARS, max_size=40).map("".join) | st.text(max_size=40)
numbers = st.integers(min_value=-3, max_value=10**12).map(str)
big_numbers = st.sampled_from(["0", "1", "2", "99999999", "1000000000", "1" * 30, "²", "-1"])


def compressed(counts: st.SearchStrategy[int]) -> st.SearchStrategy[tuple[str, list[int]]]:
    """Slurm's compressed per-node counts (``2(x3),1``) and their expansion."""
    part = st.tuples(counts, st.integers(1, 6), st.booleans())
    return st.lists(part, min_size=1, max_size=4).map(
        lambda parts: (
            ",".join(f"{c}(x{r})" if r > 1 or x else str(c) for c, r, x in parts),
            [c for c, r, _x in parts for _ in range(r)],
        )
    )


json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


# --------------------------------------------------------------------------- Slurm variables
slurm_values = st.one_of(
    hostile_text, numbers, big_numbers, compressed(st.integers(0, 70000)).map(lambda c: c[0])
)


@fuzz(300)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "SLURM_JOB_NUM_NODES",
                "SLURM_NNODES",
                "SLURM_NTASKS",
                "SLURM_NTASKS_PER_NODE",
                "SLURM_TASKS_PER_NODE",
                "SLURM_STEP_TASKS_PER_NODE",
            ]
        ),
        slurm_values,
    )
)
def test_slurm_task_variables(env: dict[str, str]) -> None:
    env = {"SLURM_JOB_ID": "1", **env}
    with bounded():
        try:
            n = slurm.nodes(env)
        except TopobindError:
            return
        assert 1 <= n <= slurm.MAX_NODES
        try:
            per_node = slurm.tasks_per_node(env)
        except TopobindError:
            per_node = None
        if per_node is not None:
            assert per_node.count >= 1
        try:
            counts = slurm.tasks_on_each_node(env)
        except TopobindError:
            return
        if counts is not None:
            assert len(counts) == n and all(c >= 1 for c in counts)


@fuzz(200)
@given(compressed(st.integers(1, 512)))
def test_slurm_per_node_counts_expand_exactly(case: tuple[str, list[int]]) -> None:
    text, expected = case
    assert slurm.expand_counts(text) == expected
    assert slurm.expand_counts(text, len(expected)) == expected
    with pytest.raises(TopobindError, match="names more than"):
        slurm.expand_counts(text, len(expected) - 1)


def _job_text(draw_lines: list[tuple[str, str]]) -> str:
    return "JobId=1 JobName=x\n" + "".join(
        f"     Nodes={n} CPU_IDs={c} Mem=0 GRES=\n" for n, c in draw_lines
    )


@fuzz(200)
@given(
    st.lists(
        st.tuples(st.sampled_from(["n1", "n[1-2]", "n2", "", "n1,n2"]), hostile_text | numbers),
        max_size=3,
    )
)
def test_scontrol_cpu_ids(lines: list[tuple[str, str]]) -> None:
    text = _job_text(lines)

    def answer(_env: object, args: list[str], failed: str, fix: str = "") -> str:
        if args[1] == "hostnames":
            return {"n[1-2]": "n1\nn2\n", "n1,n2": "n1\nn2\n"}.get(args[2], args[2] + "\n")
        return text

    with mock.patch.object(slurm, "_scontrol", answer), bounded():
        try:
            cpus = slurm._job_cpu_ids({"SLURM_JOB_ID": "1"})
        except TopobindError:
            return
    for ids in cpus.values():
        assert all(0 <= i < MAX_PUS for i in ids)


@fuzz(200)
@given(
    st.lists(st.lists(st.integers(0, 64), min_size=1, max_size=4, unique=True), max_size=8),
    st.frozensets(st.integers(0, 100), max_size=20),
    st.integers(0, 4),
)
def test_slurm_cpu_ids_to_os_pus(cores: list[list[int]], ids: frozenset[int], tpc: int) -> None:
    node_cores = [tuple(c) for c in cores]
    try:
        pus = slurm.machine_cpus(node_cores, ids, tpc, "n1")
    except TopobindError:
        return
    assert pus <= {pu for core in node_cores for pu in core}


# --------------------------------------------------------------------------- numbers, names
@fuzz(300)
@given(hostile_text | numbers | big_numbers, st.integers(0, 5), st.integers(1, 1 << 20))
def test_whole_numbers(text: str, lo: int, hi: int) -> None:
    try:
        n = whole_number(text, "--x", lo, hi)
    except TopobindError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--x ")
        return
    assert lo <= n <= hi and str(n) == text.lstrip("0").rjust(1, "0") and text.isascii()


@fuzz(300)
@given(hostile_text | st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True))
def test_host_names(text: str) -> None:
    try:
        got = host_name(text)
    except TopobindError as exc:
        assert "\n" not in str(exc)
        return
    assert got == text and text.isascii() and text.strip() == text and "," not in text


# --------------------------------------------------------------------------- CPU lists
@fuzz(400)
@given(hostile_text | st.text(alphabet="0123456789-, ", max_size=30))
def test_cpu_list_text(text: str) -> None:
    with bounded():
        try:
            got = parse_list(text)
        except TopobindError as exc:
            assert "\n" not in str(exc)
            return
    assert got == sorted(set(got)) and all(0 <= i <= MAX_OS_INDEX for i in got)
    # what was read is what the text says: formatted back, it reads the same
    assert parse_list(format_list(got)) == got


@fuzz(300)
@given(st.sets(st.integers(0, 5000), max_size=60))
def test_cpu_list_round_trip(cpus: set[int]) -> None:
    assert parse_list(format_list(sorted(cpus))) == sorted(cpus)


def _hwloc_bitmap(cpus: set[int]) -> str:
    """hwloc's text of a cpuset: 32-bit words, most significant first, comma separated."""
    if not cpus:
        return "0x0"
    words = [0] * (max(cpus) // 32 + 1)
    for c in cpus:
        words[c // 32] |= 1 << (c % 32)
    return ",".join(f"0x{w:08x}" for w in reversed(words))


@fuzz(300)
@given(st.sets(st.integers(0, 3000), max_size=60))
def test_hwloc_bitmap_round_trip(cpus: set[int]) -> None:
    assert parse_hwloc_bitmap(_hwloc_bitmap(cpus)) == frozenset(cpus)


@fuzz(300)
@given(
    hostile_text
    | st.lists(st.sampled_from(["0x", "ffffffff", "1", ",", "0x0", "z", "-"]), max_size=20).map(
        "".join
    )
)
def test_hwloc_bitmap_text(text: str) -> None:
    with bounded():
        try:
            got = parse_hwloc_bitmap(text)
        except TopobindError:
            return
    assert all(0 <= c <= MAX_OS_INDEX for c in got)


# --------------------------------------------------------------------------- synthetic
level = st.tuples(
    st.sampled_from(["pack", "numa", "l3", "core", "pu", "x", "", "[numa]"]),
    st.sampled_from([":", "", "::"]),
    big_numbers | st.integers(0, 300).map(str),
).map("".join)


@fuzz(300)
@given(st.lists(level, max_size=6).map(" ".join) | hostile_text)
def test_synthetic_size_is_checked_before_hwloc(description: str) -> None:
    with bounded():
        try:
            _check_synthetic_size(description)
        except TopobindError:
            return
    product = 1
    for count in re.findall(r":([0-9]+)", re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", description)):
        product *= int(count)
    assert product <= MAX_PUS


# --------------------------------------------------------------------------- hwloc XML
XML_SOURCES = [
    TOPOLOGIES / "fakecpukinds.xml",
    TOPOLOGIES / "16em64t-4s2c2t.xml",
    TOPOLOGIES / "24em64t-2n6c2t-pci.xml",
    TOPOLOGIES / "gpu" / "mpibind-cts1-pascal.xml",
    DATA / "gpu-amd-drm.xml",
]
XML_TEXT = {p.name: p.read_text() for p in XML_SOURCES}
ATTR = re.compile(r' ([a-z_]+)="([^"]*)"')
VALUE_NAMES = ("os_index", "cpuset", "complete_cpuset", "allowed_cpuset", "nodeset", "name",
               "pci_busid", "pci_type", "type", "local_memory", "cache_size")  # fmt: skip
hostile_values = st.one_of(
    hostile_text,
    big_numbers,
    st.sampled_from(["", "0x", "0xffffffff," * 40 + "0x1", "0x00000003", "cuda0", "cuda1",
                     "0000:04:00.0", "PU", "Core", "NUMANode", "OSDev", "PCIDev", "Package"]),
)  # fmt: skip


@st.composite
def mutated_xml(draw: st.DrawFn) -> tuple[str, str]:
    """A shipped XML with a few attribute values replaced (or swapped with another value of
    the same attribute: duplicates), self-closing elements deleted or doubled, or cut."""
    name = draw(st.sampled_from(sorted(XML_TEXT)))
    text = XML_TEXT[name]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "swap", "delete", "double", "cut"]))
        spans = [m for m in ATTR.finditer(text) if m.group(1) in VALUE_NAMES]
        if kind in ("value", "swap") and spans:
            m = draw(st.sampled_from(spans))
            if kind == "swap":
                same = [o.group(2) for o in spans if o.group(1) == m.group(1)]
                value = draw(st.sampled_from(same))
            else:
                value = draw(hostile_values).replace('"', "'").replace("<", "").replace("&", "")
            text = text[: m.start(2)] + value + text[m.end(2) :]
        elif kind in ("delete", "double"):
            elems = list(re.finditer(r"<(object|info|cpukind)[^<>]*/>", text))
            if elems:
                m = draw(st.sampled_from(elems))
                text = (
                    text[: m.start()]
                    + (m.group(0) * 2 if kind == "double" else "")
                    + text[m.end() :]
                )
        else:
            text = text[: draw(st.integers(0, len(text)))]
    return name, text


def _check_topology(topo: Topology) -> None:
    """What any topology read must hold, whatever the file said."""
    pus = topo.pus
    assert len(pus) == len(set(pus)), "a PU in two cores"
    assert all(0 <= p <= MAX_OS_INDEX for p in pus)
    numa = [n.os_index for n in topo.numa_nodes]
    assert len(numa) == len(set(numa)), "two NUMA nodes with one index"
    assert all(set(n.pus) <= set(pus) for n in topo.numa_nodes)
    kinds = [set(k.pus) for k in topo.cpu_kinds]
    assert sum(map(len, kinds)) == len(set().union(*kinds)), "a PU of two kinds"
    gpus = topo.devices.gpus
    assert len({(g.vendor, g.index) for g in gpus}) == len(gpus), "two GPUs with one index"
    names = [n for g in gpus for n in g.names]
    assert len(names) == len(set(names)), "one OS device in two GPUs"
    topo.summary()


@fuzz(150)
@given(mutated_xml())
def test_hwloc_xml_mutations(case: tuple[str, str]) -> None:
    name, text = case
    with bounded():
        try:
            topo = parse_xml(text, source=name)
        except TopobindError as exc:
            assert "\n" not in str(exc)
            return
        _check_topology(topo)
        for layout in ("compact", "per-numa"):
            try:
                plan = plan_of(topo, layout)
            except TopobindError:
                continue
            cpus = [c for r in plan.ranks for c in r.cpus]
            assert len(cpus) == len(set(cpus)) and set(cpus) <= set(topo.pus)


# --------------------------------------------------------------------------- probe JSON
GOOD_PROBE = {
    "kernel": "whereami",
    "host": "h",
    "rank": 0,
    "params": {"device_env": {"CUDA_VISIBLE_DEVICES": "0"}},
    "placement": [{"rank": 0, "thread": 0, "cpu": 1, "numa": 0, "affinity": [1], "host": "h"}],
}


@st.composite
def probe_doc(draw: st.DrawFn) -> Any:
    doc = json.loads(json.dumps(GOOD_PROBE))
    target = draw(st.sampled_from(["doc", "entry", "params", "whole"]))
    if target == "whole":
        return draw(json_value)
    where = {"doc": doc, "entry": doc["placement"][0], "params": doc["params"]}[target]
    key = draw(st.sampled_from([*where, "extra"]))
    if draw(st.booleans()):
        where.pop(key, None)
    else:
        where[key] = draw(json_value)
    return doc


@fuzz(300)
@given(st.lists(probe_doc(), min_size=1, max_size=3), st.booleans())
def test_probe_output(docs: list[Any], text_noise: bool) -> None:
    text = "\n".join(json.dumps(d, allow_nan=True) for d in docs)
    if text_noise:
        text = "srun: launcher says hello\n" + text + "\n{not json"
    with bounded():
        try:
            observed = parse_probe_output(text)
        except TopobindError as exc:
            assert "\n" not in str(exc)
        else:
            for o in observed:
                assert all(type(v) is int and v >= 0 for v in (o.rank, o.thread, o.cpu))
                assert all(type(c) is int and 0 <= c <= MAX_OS_INDEX for c in o.affinity)
                assert isinstance(o.host, str)
        try:
            envs = probe_envs(text)
        except TopobindError:
            return
        for (host, rank), env in envs.items():
            assert isinstance(host, str) and type(rank) is int and rank >= 0
            assert all(v is None or isinstance(v, str) for v in env.values())


@fuzz(40)
@given(st.lists(probe_doc(), max_size=3), st.binary(max_size=60))
def test_sample_files(
    tmp_path_factory: pytest.TempPathFactory, docs: list[Any], junk: bytes
) -> None:
    where = tmp_path_factory.mktemp("samples")
    paths = []
    for i, d in enumerate(docs):
        path = where / f"sample-{i}.json"
        path.write_text(json.dumps(d) + "\n")
        paths.append(str(path))
    (where / "junk.json").write_bytes(junk)
    with bounded():
        observed = judged_threads(
            read_sample_files([*paths, str(where / "junk.json"), str(where / "missing.json")])
        )
    assert all(type(o.cpu) is int for o in observed)


# --------------------------------------------------------------------------- result documents
#: A valid STREAM result (the fuzz changes parts of it); tests/data/results/ never held one,
#: so the test below was always skipped.
GOOD_RESULT: dict[str, Any] = {
    "schema": "topobind.result/1",
    "kernel": "stream",
    "host": "node042",
    "timestamp": "2026-11-22T22:40:00Z",
    "layout": "compact",
    "ranks": 1,
    "threads": 2,
    "params": {"array_elements": 1000, "topology": "pack:1 core:2 pu:1"},
    "pages": {"requested": "2M", "kib": 2048, "fallback": False, "note": "ok", "method": "thp"},
    "placement": [
        {"rank": 0, "thread": 0, "cpu": 0, "numa": 0, "affinity": [0]},
        {"rank": 0, "thread": 1, "cpu": 1, "numa": 0, "affinity": [1]},
    ],
    "metrics": {
        "triad": {
            "unit": "MB/s",
            "higher_is_better": True,
            "trials": [1.0, 2.0, 3.0],
            "best": 3.0,
            "avg": 2.0,
            "min": 1.0,
            "max": 3.0,
            "median": 2.0,
            "warmup": 0,
        }
    },
    "headline": {
        "metric": "triad",
        "stat": "best",
        "value": 3.0,
        "unit": "MB/s",
        "higher_is_better": True,
    },
    "valid": True,
    "validation": "STREAM: solution validates",
}


@st.composite
def result_doc(draw: st.DrawFn) -> Any:
    doc = json.loads(json.dumps(GOOD_RESULT))
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(["doc", "headline", "metric", "pages", "whole"]))
        if target == "whole":
            return draw(json_value)
        where = {
            "doc": doc,
            "headline": doc.get("headline") if isinstance(doc.get("headline"), dict) else doc,
            "metric": next(iter(doc["metrics"].values()), doc)
            if isinstance(doc.get("metrics"), dict) and doc["metrics"]
            else doc,
            "pages": doc.get("pages") if isinstance(doc.get("pages"), dict) else doc,
        }[target]
        key = draw(st.sampled_from(sorted([*where, "extra"])))
        if draw(st.booleans()):
            where.pop(key, None)
        else:
            where[key] = draw(
                json_value | st.sampled_from([1e308, -0.0, float("nan"), [float("nan")] * 3])
            )
    return doc


@fuzz(200)
@given(result_doc())
def test_result_documents(doc: Any) -> None:
    with bounded():
        try:
            run = result_from_document(doc)
        except ResultError as exc:
            assert "\n" not in str(exc)
            return
        if run.headline is not None:
            assert math.isfinite(run.headline.value) and 0 < run.headline.value <= MAX_VALUE
            assert run.headline.metric in run.metrics
        good = result_from_document(GOOD_RESULT)
        with contextlib.suppress(TopobindError):
            analyse([run, good], Options())


# --------------------------------------------------------------------------- site YAML
SITE = (REPO / "site_configs" / "betzy" / "site.yaml").read_text().splitlines()


YAML_JUNK = st.sampled_from(["[", "{", "*x", "&a", "!!python/object:os.system", "~", "-1e999"])


YAML_JUNK = st.sampled_from(["[", "{", "*x", "&a", "!!python/object:os.system", "~", "-1e999"])


@st.composite
def site_yaml(draw: st.DrawFn) -> str:
    lines = list(SITE)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["value", "delete", "indent", "junk"]))
        if kind == "value" and ":" in lines[i]:
            key = lines[i].split(":", 1)[0]
            lines[i] = f"{key}: {draw(hostile_text | big_numbers | YAML_JUNK)}"
        elif kind == "delete":
            del lines[i]
        elif kind == "indent":
            lines[i] = " " + lines[i]
        else:
            lines.insert(i, draw(hostile_text))
    return "\n".join(lines) + "\n"


@fuzz(100)
@given(site_yaml())
def test_site_yaml(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    site = tmp_path_factory.mktemp("sites") / "betzy"
    site.mkdir()
    (site / "site.yaml").write_text(text)
    refs = REPO / "site_configs" / "betzy" / "references.yaml"
    if refs.exists():
        shutil.copy(refs, site / "references.yaml")
    with bounded():
        try:
            loaded = load_site_file(site / "site.yaml")
        except TopobindError as exc:
            assert str(exc)
            return
    assume(loaded is not None)
    assert loaded.name
