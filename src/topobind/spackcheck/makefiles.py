"""The targets and variables of a project Makefile, as the recipe's ``make`` calls need them.

Read statically (no ``make -p``: that would run ``$(shell ...)`` lines): explicit rule
targets (``all:``, ``install: all``; a name only listed in ``.PHONY`` has no rule), the
default goal (the first target not starting with a dot),
and the variables the Makefile assigns or expands (``PREFIX ?=``, ``$(MPICC)``), so that a
``make -C kernels install PREFIX=...`` in the recipe is known to name real things.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_RULE = re.compile(r"^([^\s#=:$%][^=:#]*?)\s*::?(?!=)")
_ASSIGN = re.compile(r"^(?:override\s+|export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:\?|:|::|\+|!)?=")
_EXPAND = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")


@dataclass(frozen=True)
class Makefile:
    path: Path
    targets: frozenset[str]
    default_goal: str | None
    variables: frozenset[str]


def read_makefile(path: Path) -> Makefile:
    targets: list[str] = []
    variables: set[str] = set()
    text = path.read_text()
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith("\t"):  # a recipe line
            variables.update(_EXPAND.findall(line))
            continue
        variables.update(_EXPAND.findall(line))
        assign = _ASSIGN.match(line)
        if assign:
            variables.add(assign.group(1))
            continue
        rule = _RULE.match(line)
        if rule:
            # .PHONY and other special targets name no rule of their own
            names = rule.group(1).split()
            targets.extend(n for n in names if "$" not in n and "%" not in n)
    goal = next((t for t in targets if not t.startswith(".")), None)
    return Makefile(path, frozenset(targets), goal, frozenset(variables))
