"""Checking site files: ``schemas/site.schema.json`` and the rules it cannot express,
every problem as ``FILE: PATH: what is wrong (how to fix it)``."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from topobind.errors import TopobindError
from topobind.fsutil import package_schema
from topobind.validation.sites.catalogue import CHECK_VARIABLES, CHECKS, OWN_SETTINGS, SettingSpec

#: Largest site file read (the shipped ones are a few KiB).
MAX_SITE_BYTES = 1 << 20
#: Most values a site file may hold once its YAML aliases are expanded (the shipped ones
#: hold a few hundred).
MAX_SITE_VALUES = 100_000


# --- validation
class SiteError(TopobindError):
    """A site file is malformed; ``problems`` holds every ``FILE: PATH: message`` line."""

    def __init__(self, problems: list[str], site: str | None = None) -> None:
        more = ""
        if len(problems) > 1:
            more = f" (and {len(problems) - 1} more problems"
            more += f": topobind site check {site})" if site else ")"
        super().__init__(problems[0] + more)
        self.problems = problems


@lru_cache(maxsize=1)
def site_schema() -> dict[str, Any]:
    doc: dict[str, Any] = package_schema("site.schema.json")
    return doc


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _dotted(parts: Iterable[object]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _subschema(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        ref = schema["$ref"]
        node: Any = root
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _hint(schema: dict[str, Any], root: dict[str, Any]) -> str | None:
    sub = _subschema(schema, root)
    return schema.get("x-hint") or sub.get("x-hint")


def _describe(error: Any, root: dict[str, Any]) -> tuple[list[object], str]:
    """(path, 'problem (fix)') for one jsonschema error."""
    path = list(error.absolute_path)
    schema = error.schema
    hint = _hint(schema, root)
    kind = error.validator
    inst = error.instance
    if kind == "additionalProperties" and isinstance(inst, dict):
        allowed = sorted(schema.get("properties", {}))
        extras = [k for k in inst if k not in allowed]
        key = extras[0] if extras else "?"
        if allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            fix = (f"did you mean '{close[0]}'? " if close else "") + (
                f"allowed keys: {', '.join(allowed)}"
            )
        else:
            fix = hint or "remove it"
        return [*path, key], f"unknown key '{key}' ({fix})"
    if kind == "required":
        missing = re.search(r"'([^']+)' is a required property", error.message)
        key = missing.group(1) if missing else "?"
        sub_hint = None
        node: Any = error
        while node is not None and sub_hint is None:  # if/then branches: look at the parent
            props = _subschema(node.schema, root).get("properties", {})
            if key in props:
                sub_hint = _hint(props[key], root)
            node = node.parent
        if sub_hint is None and isinstance(inst, dict):  # a then-branch: find the definition
            for d in root.get("$defs", {}).values():
                props = d.get("properties", {})
                if key in props and set(inst) <= set(props):
                    sub_hint = _hint(props[key], root)
                    break
        return [*path, key], f"missing (add it: {sub_hint})" if sub_hint else "missing"
    if kind in ("maximum", "minimum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"maximum": "<=", "minimum": ">=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
        problem = f"must be {op[kind]} {error.validator_value}, got {inst!r}"
        return path, problem + (f" ({hint})" if hint else "")
    if kind == "type":
        want = error.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        problem = f"must be {'an' if str(want)[0] in 'aeiou' else 'a'} {want}, got {inst!r}"
        return path, problem + (f" ({hint})" if hint else "")
    if kind == "enum":
        choices = ", ".join(str(v) for v in error.validator_value)
        problem = f"{inst!r} is not one of: {choices}"
        return path, problem + (f" ({hint})" if hint else "")
    if kind == "const":
        problem = f"must be {error.validator_value!r}, got {inst!r}"
        return path, problem + (f" ({hint})" if hint else "")
    if kind == "pattern":
        return path, f"{inst!r} is not valid" + (f" ({hint})" if hint else "")
    if kind == "propertyNames":
        return path, f"{error.message}" + (f" ({hint})" if hint else "")
    if kind in ("minItems", "minLength"):
        return path, "must not be empty" + (f" ({hint})" if hint else "")
    return path, error.message + (f" ({hint})" if hint else "")


def schema_problems(doc: Any, display: str, which: str = "site") -> list[str]:
    """Every schema violation of ``doc`` as ``FILE: PATH: problem (fix)`` lines, in file order."""

    root = site_schema()
    schema = root if which == "site" else {"$ref": "#/$defs/references", "$defs": root["$defs"]}
    validator = jsonschema.Draft202012Validator(schema)
    errors = list(validator.iter_errors(doc))
    # if/then failures (a 'measured' provenance without a date) come as plain 'required' errors;
    # the deepest error of each branch is the most useful one.
    leaves: list[Any] = []
    for err in errors:
        if err.context:
            leaves.extend(e for e in err.context if not e.context)
        else:
            leaves.append(err)
    out: list[str] = []
    seen: set[str] = set()
    for err in sorted(leaves, key=lambda e: [str(p) for p in e.absolute_path]):
        path, message = _describe(err, root)
        line = f"{display}: {_dotted(path)}: {message}"
        if line not in seen:
            seen.add(line)
            out.append(line)
    return out + _non_finite(doc, display, [])


def _non_finite(doc: Any, display: str, path: list[str]) -> list[str]:
    """YAML's .nan and .inf are floats JSON Schema's 'number' accepts; no figure, count or
    size of a site is one (a NaN compares false, so every node would conform)."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return [f"{display}: {_dotted(path)}: {doc} is not a finite number (write the value, "
                "e.g. 256)"]  # fmt: skip
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _non_finite(v, display, [*path, str(k)])]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _non_finite(v, display, [*path, str(i)])]
    return []


def _target_problems(targets: Mapping[str, Any], display: str, prefix: str) -> list[str]:
    """Check names, variants, metrics and units against the checks registry."""
    out: list[str] = []
    for check, variants in targets.items():
        spec = CHECKS[check]
        for variant, metrics in variants.items():
            if variant not in spec.variants:
                close = difflib.get_close_matches(variant, spec.variants, n=1)
                out.append(
                    f"{display}: {prefix}.{check}.{variant}: unknown {spec.variant_kind} "
                    f"'{variant}' for check {check} ("
                    + (f"did you mean '{close[0]}'? " if close else "")
                    + f"known: {', '.join(spec.variants)})"
                )
                continue
            for metric, tgt in metrics.items():
                where = f"{display}: {prefix}.{check}.{variant}.{metric}"
                mspec = spec.metrics.get(metric)
                if mspec is None:
                    close = difflib.get_close_matches(metric, list(spec.metrics), n=1)
                    out.append(
                        f"{where}: check {check} reports no metric '{metric}' ("
                        + (f"did you mean '{close[0]}'? " if close else "")
                        + f"its metrics: {', '.join(spec.metrics)})"
                    )
                    continue
                if tgt.get("unit") != mspec.unit:
                    out.append(
                        f"{where}.unit: {tgt.get('unit')!r} is not the unit check {check} "
                        f"reports for {metric} (write the reference in {mspec.unit}: "
                        f"unit: {mspec.unit})"
                    )
    return out


def _host_patterns(node: Any, display: str) -> list[str]:
    """Every node.hosts key must be a Slurm host list that expands (site check --live
    expands it on every node)."""
    from topobind.topo import hostlist

    if not isinstance(node, dict) or not isinstance(node.get("hosts"), dict):
        return []
    out: list[str] = []
    for pattern in node["hosts"]:
        try:
            hostlist.expand(str(pattern))
        except TopobindError as exc:
            out.append(f"{display}: node.hosts.{pattern}: not a Slurm host list ({exc}; e.g. "
                       "'gpu[01-04]')")  # fmt: skip
    return out


def _semantic_problems(doc: dict[str, Any], display: str, dirname: str) -> list[str]:
    out: list[str] = []
    if doc.get("name") != dirname:
        out.append(
            f"{display}: name: {doc.get('name')!r} differs from its directory {dirname!r} "
            f"(rename one so they match: name: {dirname})"
        )
    for i, rx in enumerate(doc.get("hostnames", [])):
        try:
            re.compile(rx)
        except re.error as exc:
            out.append(
                f"{display}: hostnames[{i}]: {rx!r} is not a regular expression ({exc}; "
                "escape special characters, e.g. '^login-\\d+')"
            )
    out.extend(_host_patterns(doc.get("node"), display))
    env_names = {"builtin"} | {e["name"] for e in doc.get("environments", [])}
    names: set[str] = set()
    for i, part in enumerate(doc.get("partitions", [])):
        name = part.get("name")
        if name in names:
            out.append(
                f"{display}: partitions[{i}].name: partition {name!r} is defined twice "
                "(give each partition its own name)"
            )
        names.add(name)
        for j, env in enumerate(part.get("environments", [])):
            if env not in env_names:
                out.append(
                    f"{display}: partitions[{i}].environments[{j}]: unknown environment "
                    f"{env!r} (define it under environments: or use builtin)"
                )
        if "accounting" in part and part.get("scheduler") != "slurm":
            out.append(
                f"{display}: partitions[{i}].accounting: only means something with scheduler: "
                "slurm (remove it)"
            )
        if part.get("launcher") == "srun" and part.get("scheduler") != "slurm":
            out.append(
                f"{display}: partitions[{i}].launcher: srun needs scheduler: slurm "
                "(use launcher: local or mpirun with scheduler: local)"
            )
    out.extend(_target_problems(doc.get("targets", {}), display, "targets"))
    out.extend(settings_problems(doc.get("settings", {}), display))
    return out


EACH_NODE = "each_node."  # validation.EACH_NODE: the setting under validate --each-node only


def settings_problems(settings: Mapping[str, Any], display: str) -> list[str]:
    """One line per setting the catalogue does not hold (a typo of a check or a variable)
    or whose value its kind refuses (type, bounds): checked where the site is read, not
    when a job runs on the bad value."""
    out: list[str] = []
    for key, value in settings.items():
        where = f"{display}: settings.{key}"
        name = key.removeprefix(EACH_NODE)
        check, _, var = name.rpartition(".")
        specs = _specs_of(check, var)
        if isinstance(specs, str):
            out.append(f"{where}: {specs}")
            continue
        for owner, spec in specs:
            why = setting_value_problem(spec, value)
            if why:
                whose = f" ({owner}.{var})" if not check else ""
                out.append(f"{where}: {_shown(value)}: {why}{whose}")
                break
    out.extend(_stream_cap_problem(settings, display))
    return out


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _specs_of(check: str, var: str) -> list[tuple[str, SettingSpec]] | str:
    """The specs ``[CHECK.]VAR`` names (a bare VAR: every check that has it), or why none."""
    import difflib

    if check:
        if check not in CHECK_VARIABLES or check == "TopobindCheck":
            close = difflib.get_close_matches(check, CHECK_VARIABLES, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            names = ", ".join(c for c in CHECK_VARIABLES if c != "TopobindCheck")
            return f"no check {check!r} ({hint}checks: {names})"
        mine = {**CHECK_VARIABLES["TopobindCheck"], **CHECK_VARIABLES[check]}
        if var not in mine:
            close = difflib.get_close_matches(var, mine, n=1)
            hint = f"did you mean {check}.{close[0]}? " if close else ""
            return f"{check} has no variable {var!r} ({hint}its variables: {', '.join(mine)})"
        return [(check, mine[var])]
    if var in OWN_SETTINGS:
        return [("topobind", OWN_SETTINGS[var])]
    found = [(c, v[var]) for c, v in CHECK_VARIABLES.items() if var in v]
    if not found:
        every = sorted({v for vs in CHECK_VARIABLES.values() for v in vs} | set(OWN_SETTINGS))
        close = difflib.get_close_matches(var, every, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return (f"no check has a variable {var!r} ({hint}name it as CHECK.VARIABLE, e.g. "
                "StreamCheck.elements)")  # fmt: skip
    return found


def setting_value_problem(spec: SettingSpec, value: Any) -> str:
    """Why ``value`` is no value of ``spec`` ('' when it is): the one reading of a setting."""
    from topobind.inputs import real_number, suffixed

    if spec.kind == "bool":  # YAML's true/false, or the words ReFrame's -S takes
        ok = isinstance(value, bool) or str(value).strip().lower() in ("true", "false")
        return "" if ok else "not a yes/no value (give true or false)"
    if isinstance(value, bool):
        return "a yes/no value; give a value"
    text = str(value).strip() if not isinstance(value, float) else repr(value)
    if spec.empty and text == "":
        return ""
    try:
        if spec.kind == "count":
            neg = text.startswith("-")
            digits = text[1:] if neg else text
            # the digits alone (at most 18 of them), then the setting's own range: one range
            # checked and said (a reader's wider range gave "from 0" for a setting from 1)
            short = 0 < len(digits) <= 18 and digits.isascii() and digits.isdigit()
            n = int(digits) if short else None
            if n is None or not spec.lo <= n * (-1 if neg else 1) <= spec.hi:
                return f"give a whole number from {int(spec.lo)} to {int(spec.hi)}"
        elif spec.kind in ("number", "fraction"):
            got = real_number(text, "", spec.lo, spec.hi)
            if spec.kind == "fraction" and not spec.lo < got < spec.hi:  # open bounds
                return f"give a fraction above {spec.lo:g} and below {spec.hi:g}, e.g. 0.05"
        elif spec.kind in ("size", "elements"):
            suffixed(text, "", int(spec.lo), int(spec.hi), binary=spec.kind == "size")
        elif spec.kind == "sizes":
            for part in text.split(","):
                suffixed(part, "", int(spec.lo), int(spec.hi))
        elif spec.kind == "choice" and text not in spec.choices:
            return f"give one of {', '.join(spec.choices)}"
        elif spec.kind == "duration":
            from topobind.inputs import duration

            duration(text, "")
    except TopobindError as exc:  # '<what> 'TEXT': give ...' or ': 'TEXT' is not a duration ...'
        text = str(exc)
        return text[text.index("give") :] if "give" in text else text.split(" is ", 1)[-1]
    return ""


def _stream_cap_problem(settings: Mapping[str, Any], display: str) -> list[str]:
    """StreamCheck.max_bytes_per_run against its cost model: the quick tier's trials of the
    kernel's least arrays must fit (a cap of 2K made the size probe print '0 3')."""
    from topobind.inputs import suffixed, whole_number
    from topobind.validation.sites.catalogue import (
        STREAM_BYTES_PER_ELEMENT,
        STREAM_KERNEL_MIN_ELEMENTS,
    )

    out = []
    for prefix in ("", EACH_NODE):
        cap = settings.get(
            f"{prefix}StreamCheck.max_bytes_per_run", settings.get(f"{prefix}max_bytes_per_run")
        )
        trials = settings.get(
            f"{prefix}StreamCheck.quick_trials", settings.get("StreamCheck.quick_trials", 3)
        )
        try:
            cap_b = suffixed(str(cap), "", 1, 1 << 60) if cap is not None else None
            n = whole_number(str(trials), "", 1, 10_000)
        except TopobindError:
            continue  # said above
        least = n * STREAM_KERNEL_MIN_ELEMENTS * STREAM_BYTES_PER_ELEMENT
        if cap_b is not None and cap_b < least:
            out.append(
                f"{display}: settings.{prefix}StreamCheck.max_bytes_per_run: {cap_b} bytes is "
                f"under the least {n} quick trials of STREAM move ({least} bytes: {n} x "
                f"{STREAM_KERNEL_MIN_ELEMENTS} elements x {STREAM_BYTES_PER_ELEMENT} "
                "bytes); raise it, e.g. 16G"
            )
    return out


def _read_yaml(path: Path) -> Any:

    from topobind.inputs import InputFile

    display = _display(path)
    site_file = InputFile("site file", MAX_SITE_BYTES, "give a site.yaml (docs/site-admins.md)")
    try:
        text = site_file.read_text(path)  # a regular file: a FIFO does not block the read
    except TopobindError as exc:
        raise SiteError([str(exc)]) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "?"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SiteError(
            [f"{display}: {where}: not valid YAML: {problem} (check indentation and quoting)"]
        ) from exc
    except RecursionError:
        raise SiteError([f"{display}: YAML nested too deep to be a site file"]) from None
    if not _expands_to_at_most(doc, MAX_SITE_VALUES):
        raise SiteError(
            [
                f"{display}: its YAML aliases (*name) expand to more than {MAX_SITE_VALUES:,} "
                "values, more than any site file holds; repeat fewer anchors"
            ]
        )
    return doc


def _expands_to_at_most(doc: Any, limit: int) -> bool:
    """Does ``doc`` hold at most ``limit`` values, each alias counted as a copy (the checks
    walk it so: a few anchors of anchors, 'billion laughs', would walk for hours)?"""
    stack = [doc]
    seen = 0
    while stack:
        seen += 1
        if seen > limit:
            return False
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return True
