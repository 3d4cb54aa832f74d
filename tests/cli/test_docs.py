"""Docs show real output: docs/layouts.md is exactly what scripts/gen-layouts-doc.py makes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from topobind.plan.model import validate_plan_json

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_layouts_doc_is_current() -> None:
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "gen-layouts-doc.py"), "--check"])
    assert out.returncode == 0, "docs/layouts.md is stale: run scripts/gen-layouts-doc.py"


def test_plan_format_example_is_valid_and_current() -> None:
    text = (REPO / "docs" / "plan-format.md").read_text()
    example = re.search(r"-f json\n(\{.*?\n\})\n```", text, re.S)
    assert example
    doc = json.loads(example.group(1))
    validate_plan_json(doc)
    out = subprocess.run(
        [
            str(REPO / ".venv/bin/topobind"),
            "plan",
            "-t",
            "synthetic:pack:1 numa:2 l3:1 core:2 pu:2",
            "-l",
            "per-numa",
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == doc
