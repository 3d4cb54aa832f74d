"""ReFrame's JSON run report (``reframe --report-file``): its one reader.

Everything that reads a run report goes through this module, into one record per test case,
:class:`TestCase`: ``validate`` (the table), ``validate --each-node`` (the node verdict),
``validate --history`` (the results database holds the same reports) and ``calibrate``
(the references). So they agree on where a test ran and on its variant:

* the check is the ReFrame class (``StreamCheck``), the first word of ``display_name``;
* the variant is, for a check of the catalogue (:data:`topobind.validation.sites.CHECKS`), the
  value of its parameter (``%layout=compact`` -> ``compact``) or its single variant
  (``LatencyCheck`` -> ``local``); for any other check its parameters joined by ``,``
  (``-`` for none); ReFrame's own parameters (``%.part``, ``%.nid``) are not part of it;
* the node is ReFrame's ``job_nodelist`` (what the scheduler reported), else the node the
  check was pinned to (``%.nid=``, ``--distribute``), else the host its job's post-run line
  recorded (``tb_ran_on``: the scheduler's poll can miss a job of 2 s). A pinned node that
  is not in ``job_nodelist`` is a contradiction, refused.

A report is outside input: every field is checked by hand for its type, and the first defect
is a :class:`ReportError`, one line naming the file and the field (``FILE: runs[0].
testcases[3].perfvalues["triad"][0]: must be a number, got "fast"``). Figures are finite
numbers of at most :data:`MAX_VALUE`; a rate or a time (the units the verdict divides) must be
positive; ``true`` is no number; a node name must be one literal Slurm node name (no host
list, no comma, no blank).
"""

from __future__ import annotations

import functools
import gc
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from topobind.errors import TopobindError

MAX_REPORT_BYTES = 256 * 2**20  # make bench-fleet: 200,000 test cases, ~100 MiB
MAX_VALUE = 1e100  # no figure is near it; sums of values near float's limit overflow
#: units whose figures are rates (higher is better) or times: the verdicts divide by them
RATE_UNITS = {"MB/s": True, "GB/s": True, "GFLOP/s": True, "ns": False, "us": False, "s": False}
_PARAM = re.compile(r" %([^ =]+)=(\S*)")
_DISPLAY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*( %[^ =]+=\S*)*$")
#: one literal Slurm node name: what scontrol and sinfo print for a single node
NODE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


#: settings that change no figure: topobind's own, calibrate's mode, which runs run
NOT_MEASURED = frozenset({"outlier_threshold", "node_budget", "calibrating", "sanity_once",
                          "strict_load", "tier"})  # fmt: skip


class ReportError(TopobindError):
    """A ReFrame run report (or a session of the results database) is not as ReFrame writes
    it: one line naming the file and the field."""


@dataclass(slots=True)  # not frozen: make bench-fleet builds 200,000 (frozen: 2x the time)
class Figure:
    metric: str
    value: float
    reference: float
    lower: float | None
    upper: float | None
    unit: str
    result: str | None  # ReFrame's verdict on the figure: pass, fail, or None

    @property
    def has_reference(self) -> bool:
        return not (self.reference == 0 and self.lower is None and self.upper is None)

    def limits(self) -> tuple[float | None, float | None]:
        lo = None if self.lower is None else self.reference * (1 + self.lower)
        hi = None if self.upper is None else self.reference * (1 + self.upper)
        return lo, hi


@dataclass(slots=True)
class TestCase:
    """One test case of one run of a report."""

    check: str  # the ReFrame class, e.g. StreamCheck
    variant: str  # module docstring
    node: str  # where it ran ('' unknown); several nodes joined by ','
    nodes: tuple[str, ...]
    system: str  # '' when the report does not say
    partition: str
    result: str  # pass, fail, skip, or what ReFrame wrote (aborted ...)
    fail_phase: str
    fail_reason: str  # on one line
    figures: tuple[Figure, ...]
    hashcode: str
    run: int  # the run of the report it belongs to (ReFrame --reruns, --max-retries)
    outputdir: str
    display: str  # ReFrame's display_name (name when there is none)
    #: the evidence around the run (the check's tb_evidence: a result document's evidence
    #: section, measure/causes.py reads it); None when the report holds none
    evidence: dict[str, Any] | None = None
    #: the matrices of the run's result document (the check's tb_matrices: {"matrices": ...},
    #: measure/where.py reads them); None when the report holds none
    where: dict[str, Any] | None = None
    #: ReFrame's time_total of the case (seconds; None when absent or not a finite number)
    seconds: float | None = None

    @property
    def key(self) -> str:
        """The same test case in every run (and retry)."""
        return f"{self.display}@{self.system}:{self.partition}"

    @property
    def passed(self) -> bool:
        return self.result == "pass"

    @property
    def failed_before_performance(self) -> bool:
        """Failed, and not (only) on a figure outside its reference."""
        return self.result != "pass" and self.fail_phase != "performance"


@dataclass(frozen=True)
class Report:
    source: str
    cases: tuple[TestCase, ...]  # every run, in order
    start: float | None  # session_info.time_start_unix
    runs: int
    #: the -S settings of the session (session_info.cmdline): [CHECK.]VAR -> value
    settings: tuple[tuple[str, str], ...] = ()

    def settings_of(self, check: str) -> tuple[tuple[str, str], ...]:
        """The settings that reach ``check``'s figures: its own (CHECK.VAR) and the bare ones,
        less :data:`NOT_MEASURED` (no check measures differently for them)."""
        own = f"{check}."
        out = {}
        for key, value in self.settings:
            name = key.removeprefix(own)
            if name in NOT_MEASURED or (name == key and "." in key):
                continue
            if key.startswith(own):
                out[name] = value
            else:
                out.setdefault(name, value)
        return tuple(sorted(out.items()))

    def final(self) -> list[TestCase]:
        """The last attempt of every test case (after --max-retries), in first-run order."""
        last: dict[str, TestCase] = {}
        for tc in self.cases:
            last[tc.key] = tc
        return list(last.values())


# --------------------------------------------------------------------------- fields
def _show(value: object) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _err(source: str, where: str, what: str) -> ReportError:
    return ReportError(f"{source}: {where}: {what}")


def _text(raw: dict[str, Any], key: str, source: str, where: str, default: str = "") -> str:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _err(source, f"{where}.{key}", f"must be a string, got {_show(value)}")
    return value


def number(value: object, source: str, where: str) -> float:
    """A finite JSON number (not ``true``) of at most :data:`MAX_VALUE`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _err(source, where, f"must be a number, got {_show(value)}")
    out = float(value)
    if not math.isfinite(out) or abs(out) > MAX_VALUE:
        raise _err(source, where, f"must be a finite number of at most {MAX_VALUE:g}, got "
                   f"{_show(value)}")  # fmt: skip
    return out


def _bound(value: object, source: str, where: str) -> float | None:
    return None if value is None else number(value, source, where)


def _figure(key: object, vals: object, source: str, where: str) -> Figure | None:
    """One perfvalues entry: [value, reference, lower, upper, unit(, result)]; None when
    ReFrame recorded no value (the check failed before measuring)."""
    if type(vals) is list and len(vals) >= 5 and type(vals[0]) is float and (  # fast path
        type(vals[1]) in (int, float) and -MAX_VALUE <= vals[1] <= MAX_VALUE
        and vals[2] is None and vals[3] is None
        and type(vals[4]) is str and (len(vals) == 5 or type(vals[5]) is str)
    ):  # fmt: skip
        value = vals[0]
        if 0 < value <= MAX_VALUE or (value <= 0 and vals[4] not in RATE_UNITS and
                                       value >= -MAX_VALUE):  # fmt: skip
            result = vals[5] if len(vals) > 5 else None
            metric = str(key).split(":")[-1]
            return Figure(metric, value, float(vals[1]), None, None, vals[4], result)
    return _checked_figure(key, vals, source, where)


def _checked_figure(key: object, vals: object, source: str, where: str) -> Figure | None:
    at = f"{where}.perfvalues[{_show(key)}]"
    if not isinstance(vals, list) or len(vals) < 5:
        raise _err(source, at, "must be a list [value, reference, lower, upper, unit, result], "
                   f"got {_show(vals)}")  # fmt: skip
    if vals[0] is None:
        return None
    value = number(vals[0], source, f"{at}[0]")
    ref = number(vals[1], source, f"{at}[1]")
    lower, upper = _bound(vals[2], source, f"{at}[2]"), _bound(vals[3], source, f"{at}[3]")
    unit = vals[4]
    if not isinstance(unit, str):
        raise _err(source, f"{at}[4]", f"the unit must be a string, got {_show(unit)}")
    result = vals[5] if len(vals) > 5 else None
    if result is not None and not isinstance(result, str):
        raise _err(source, f"{at}[5]", f"must be pass, fail or null, got {_show(result)}")
    if unit in RATE_UNITS and value <= 0:
        raise _err(source, f"{at}[0]", f"a {unit} figure must be positive, got {_show(vals[0])}")
    metric = str(key).split(":")[-1]
    return Figure(metric, value, ref, lower, upper, unit, result)


@functools.lru_cache(maxsize=65536)  # the same names come back in every run
def parse_name(display_name: str) -> tuple[str, tuple[tuple[str, str], ...], str | None]:
    """``StreamCheck %layout=compact %.part=local:slurm %.nid=node1`` ->
    (StreamCheck, (("layout", "compact"),), node1). ValueError for a parameter named
    twice (two ``%.nid``: which node ran it?)."""
    if not _DISPLAY.match(display_name):
        raise ValueError("not a ReFrame test name (CLASS %param=value ...)")
    check = display_name.split(" %")[0].strip()
    pairs = _PARAM.findall(display_name)
    names = [k for k, _ in pairs]
    twice = sorted({k for k in names if names.count(k) > 1})
    if twice:
        raise ValueError(f"parameter %{twice[0]} given {names.count(twice[0])} times")
    params = dict(pairs)
    node = params.pop(".nid", None)
    return check, tuple((k, v) for k, v in params.items() if not k.startswith(".")), node


@functools.lru_cache(maxsize=4096)
def variant_of(check: str, params: tuple[tuple[str, str], ...]) -> str:
    """The variant (module docstring): the catalogue's name for it, else the parameters."""
    from topobind.validation.sites import CHECKS

    for spec in CHECKS.values():
        if spec.reframe_class == check:
            if spec.parameter is None:
                return spec.variants[0]
            value = dict(params).get(spec.parameter)
            if value:
                return value
            break
    return ",".join(v for _, v in params) or "-"


def node_names(raw: object, source: str, where: str) -> tuple[str, ...]:
    """The literal node names of a ``job_nodelist`` (``None`` and ``"None"``: none)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _err(source, where, f"must be a list of node names, got {_show(raw)}")
    out: list[str] = []
    for i, name in enumerate(raw):
        if name is None or name == "None" or name == "":
            continue
        out.append(literal_node(name, source, f"{where}[{i}]"))
    return tuple(dict.fromkeys(out))


@functools.lru_cache(maxsize=65536)  # the same nodes come back in every test case
def _is_node(name: str) -> bool:
    return bool(NODE_NAME.match(name))


def literal_node(name: object, source: str, where: str) -> str:
    if not isinstance(name, str) or not _is_node(name):
        raise _err(source, where, f"{_show(name)} is not one node name (a literal Slurm node "
                   "name: no host list, comma or blank)")  # fmt: skip
    return name


def _node(raw: dict[str, Any], nid: str | None, source: str, where: str) -> tuple[str, ...]:
    listed = node_names(raw.get("job_nodelist"), source, f"{where}.job_nodelist")
    if nid is not None:
        literal_node(nid, source, f"{where}.display_name %.nid")
        if listed and nid not in listed:
            raise _err(source, where, f"pinned to {nid} (%.nid) but ReFrame's job_nodelist "
                       f"says {','.join(listed)}: the report contradicts itself")  # fmt: skip
        return (nid,)
    if listed:
        return listed
    ran_on = raw.get("tb_ran_on")
    if ran_on:
        return (literal_node(ran_on, source, f"{where}.tb_ran_on"),)
    return ()


def _texts(raw: dict[str, Any], source: str, where: str) -> tuple[str, ...]:
    """display (or name), result, system, partition, fail_phase, outputdir: each a string
    (None: the default); ReportError naming the first that is not."""
    get = raw.get
    d, r, s, p, f, o = (get("display_name") or get("name"), get("result"), get("system"),
                        get("partition"), get("fail_phase"), get("outputdir"))  # fmt: skip
    ok = _STR_OR_NONE
    if (type(d) in ok and type(r) in ok and type(s) in ok and type(p) in ok  # the usual case
            and type(f) in ok and type(o) in ok):  # fmt: skip
        return (d or "", r or "", s or "", p or "", f or "", o or "")
    display = _text(raw, "display_name", source, where) or _text(raw, "name", source, where)
    rest = [_text(raw, k, source, where) for k in _TEXT_KEYS[1:]]
    return (display, *rest)


_STR_OR_NONE = frozenset((str, type(None)))
_TEXT_KEYS = ("display_name", "result", "system", "partition", "fail_phase", "outputdir")


def testcase_from(raw: object, source: str, where: str, run: int) -> TestCase:
    """One test case of a report, every field checked (ReportError on the first defect)."""
    if not isinstance(raw, dict):
        raise _err(source, where, f"must be a test case (an object), got {_show(raw)}")
    display, result, system, partition, fail_phase, outputdir = _texts(raw, source, where)
    if not display.strip():
        raise _err(source, where, "has no display_name or name")
    try:
        check, params, nid = parse_name(display)
    except ValueError as exc:
        raise _err(source, f"{where}.display_name", f"{exc}: {_show(display)}") from None
    perf = raw.get("perfvalues") or {}
    if not isinstance(perf, dict):
        raise _err(source, f"{where}.perfvalues", f"must be an object, got {_show(perf)}")
    figures = [_figure(k, v, source, where) for k, v in perf.items()]
    nodes = _node(raw, nid, source, where)
    hashcode = raw.get("hashcode")
    reason = raw.get("fail_reason")
    return TestCase(
        check,
        variant_of(check, params),
        nodes[0] if len(nodes) == 1 else ",".join(nodes),
        nodes,
        system,
        partition,
        result or "?",
        fail_phase,
        " ".join(str(reason).split()) if reason else "",
        tuple(f for f in figures if f is not None),
        "" if hashcode is None else str(hashcode),
        run,
        outputdir,
        display,
        _evidence(raw.get("tb_evidence")),
        _evidence(raw.get("tb_matrices")),
        _seconds(raw.get("time_total")),
    )


def _seconds(raw: object) -> float | None:
    """A test case's time_total: a finite number of seconds from 0 to a week, else None."""
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    value = float(raw)
    return value if math.isfinite(value) and 0 <= value <= 7 * 86400 else None


def _evidence(raw: object) -> dict[str, Any] | None:
    """A test case's ``tb_evidence`` or ``tb_matrices``: an object (read field by field, never
    trusted, by topobind.measure.causes.signals_of and verdict's matrices), else None."""
    return raw if isinstance(raw, dict) and raw else None


def report_from_document(
    doc: object, source: str, run_offset: int = 0, consume: bool = False
) -> Report:
    """A decoded report as a :class:`Report` (ReportError naming ``source`` and the field);
    ``consume``: drop each test case from ``doc`` once read (a big report's memory)."""
    if not isinstance(doc, dict):
        raise ReportError(f"{source}: not a ReFrame run report (a JSON object with 'runs')")
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise _err(source, "runs", f"must be the list of runs, got {_show(runs)}")
    cases: list[TestCase] = []
    for r, one in enumerate(runs):
        if not isinstance(one, dict):
            raise _err(source, f"runs[{r}]", f"must be an object, got {_show(one)}")
        tcs = one.get("testcases", [])
        if not isinstance(tcs, list):
            raise _err(source, f"runs[{r}].testcases", f"must be a list, got {_show(tcs)}")
        for i, tc in enumerate(tcs):
            cases.append(testcase_from(tc, source, f"runs[{r}].testcases[{i}]", run_offset + r))
            if consume:
                tcs[i] = None
    info = doc.get("session_info")
    start = None
    settings: tuple[tuple[str, str], ...] = ()
    if isinstance(info, dict) and info.get("time_start_unix") is not None:
        start = number(info["time_start_unix"], source, "session_info.time_start_unix")
    if isinstance(info, dict) and isinstance(info.get("cmdline"), str):
        settings = cmdline_settings(info["cmdline"])
    return Report(source, tuple(cases), start, len(runs), settings)


MAX_CMDLINE = 1 << 20  # a ReFrame command line of a session: far less


def cmdline_settings(cmdline: str) -> tuple[tuple[str, str], ...]:
    """The ``-S KEY=VALUE`` (``-SKEY=VALUE``, ``--setvar``) options of a ReFrame command line
    (session_info.cmdline, shell-quoted), the last of each key winning; () when it cannot be
    split (then every session compares as having none)."""
    import shlex

    try:
        args = shlex.split(cmdline[:MAX_CMDLINE])
    except ValueError:
        return ()
    out: dict[str, str] = {}
    for i, a in enumerate(args):
        text = None
        if a in ("-S", "--setvar") and i + 1 < len(args):
            text = args[i + 1]
        elif a.startswith("--setvar="):
            text = a.split("=", 1)[1]
        elif a.startswith("-S") and len(a) > 2:
            text = a[2:]
        if text is not None and "=" in text:
            key, _, value = text.partition("=")
            out[key.strip()] = value.strip()
    return tuple(sorted(out.items()))


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str, source: str) -> Any:
    """JSON as ReFrame writes it (no NaN or Infinity); ReportError naming ``source``."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ReportError(f"{source}: not JSON (line {exc.lineno} column {exc.colno}: "
                          f"{exc.msg}); give a ReFrame --report-file") from None  # fmt: skip
    except ValueError as exc:
        raise ReportError(f"{source}: {exc} (ReFrame writes finite numbers)") from None
    except RecursionError:
        raise ReportError(f"{source}: JSON nested too deep to be a ReFrame report") from None


def read_report(path: str, run_offset: int = 0) -> Report:
    """One report file: a regular file of at most :data:`MAX_REPORT_BYTES`, then
    :func:`report_from_document`."""
    from topobind.measure.results import read_bytes

    try:
        data = read_bytes(path, MAX_REPORT_BYTES)
    except TopobindError as exc:
        raise ReportError(str(exc).replace("result file", "ReFrame report")) from None
    text = data.decode("utf-8", errors="replace")
    del data
    doc = parse_json(text, path)
    del text
    # no reference cycles are made here: the collector's passes over the millions of objects
    # of a big report only cost time (make bench-fleet: a third of it)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return report_from_document(doc, path, run_offset, consume=True)
    finally:
        if enabled:
            gc.enable()


def read_reports(paths: Iterable[str]) -> list[Report]:
    """Several report files, their runs numbered one after the other."""
    out: list[Report] = []
    offset = 0
    for p in paths:
        out.append(read_report(p, offset))
        offset += out[-1].runs
    return out


def cases_of(
    items: Iterable[TestCase | dict[str, Any]], source: str = "<report>"
) -> list[TestCase]:
    """Test cases, a decoded one read by :func:`testcase_from` (tests, callers with JSON)."""
    return [
        tc if isinstance(tc, TestCase) else testcase_from(tc, source, f"testcases[{i}]", 0)
        for i, tc in enumerate(items)
    ]
