"""Docs show real output: docs/layouts.md is exactly what scripts/gen-layouts-doc.py makes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from cli_helpers import Cli
from paths import REPO

from topobind.plan.model import validate_plan_json

pytestmark = pytest.mark.slow


def test_layouts_doc_is_current() -> None:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "gen-layouts-doc.py"), "--check"])
    assert out.returncode == 0, "docs/layouts.md is stale: run scripts/gen-layouts-doc.py"


def test_plan_format_example_is_valid_and_current(topobind_cli: Cli) -> None:
    text = (REPO / "docs" / "plan-format.md").read_text()
    example = re.search(r"-f json\n(\{.*?\n\})\n```", text, re.S)
    assert example
    doc = json.loads(example.group(1))
    validate_plan_json(doc)
    out = topobind_cli(
        "plan", "-t", "synthetic:pack:1 numa:2 l3:1 core:2 pu:2", "-l", "per-numa", "-f", "json"
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == doc
