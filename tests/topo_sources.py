"""Topology sources for tests: every XML in ../shared/topologies and every synthetic line."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOPOBIND_SHARED", REPO.parent / "shared"))
TOPOLOGIES = SHARED / "topologies"


def xml_files() -> list[Path]:
    return sorted(TOPOLOGIES.glob("*.xml"))


def synthetic() -> dict[str, str]:
    """name -> 'synthetic:DESCRIPTION' from synthetic.tsv."""
    out: dict[str, str] = {}
    for line in (TOPOLOGIES / "synthetic.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, desc, *_ = line.split("\t")
        out[name] = "synthetic:" + desc
    return out


def all_sources() -> list[tuple[str, str]]:
    """(test id, topology source) for every shared topology."""
    return [(p.stem, str(p)) for p in xml_files()] + list(synthetic().items())


BETZY = synthetic().get(
    "betzy-epyc7742", "synthetic:pack:2 numa:4 l3:4 core:4 pu:2(indexes=2*128:1*2)"
)
