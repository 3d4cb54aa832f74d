"""JSON for people and machines: indented objects, number lists kept on one line."""

from __future__ import annotations

import json
import re
from typing import Any

_NUMS = re.compile(r"\[\s*(-?[\d.eE+-]+(?:\s*,\s*-?[\d.eE+-]+)*)\s*\]")
_LISTS = re.compile(r"\[\s*((?:\[[^\[\]\n]*\]\s*,\s*)*\[[^\[\]\n]*\])\s*\]")


def dumps(obj: Any) -> str:
    text = json.dumps(obj, indent=1)
    text = _NUMS.sub(lambda m: "[" + ", ".join(re.split(r"\s*,\s*", m.group(1))) + "]", text)
    return _LISTS.sub(lambda m: "[" + ", ".join(re.split(r"\s*,\s*(?=\[)", m.group(1))) + "]", text)
