"""No path of a developer's or CI's machine in docs/ (issue 29): sample output shows what a
user sees (~/job, /path/to/topobind, XXXXXXXX for a random temporary name), and the
scripts that capture output for docs/ make the replacement themselves (scripts/docpaths.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
from docpaths import MACHINE_PATH, user_paths  # noqa: E402

TEXT = {".md", ".sbatch", ".yml", ".yaml", ".txt", ".sh", ".json"}


def doc_files() -> list[Path]:
    files = [p for p in (REPO / "docs").rglob("*") if p.suffix in TEXT and p.is_file()]
    return [*files, REPO / "README.md"]


def test_no_machine_path_in_the_docs() -> None:
    found = []
    for path in doc_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in MACHINE_PATH.finditer(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {m.group(0)}... in {line.strip()}")
    assert not found, "machine paths (run scripts/docpaths.py FILE):\n" + "\n".join(found[:20])


@pytest.mark.parametrize(
    "captured, shown",
    [
        ("export PATH=/work/main/.venv/bin:$PATH", "export PATH=/path/to/topobind/.venv/bin:$PATH"),
        ("/work/wt/mpislurm/rankstep/bin/rankexec", "/path/to/topobind/rankstep/bin/rankexec"),
        ("-t /work/shared/topologies/a.xml", "-t /path/to/shared/topologies/a.xml"),
        ("into /tmp/topobind-dry-run-g8mk0db4;", "into /tmp/topobind-dry-run-XXXXXXXX;"),
        ("/tmp/tbdoc/.topobind-run-j91v6mue/hostfile", "~/job/.topobind-run-XXXXXXXX/hostfile"),
        ("log /tmp/rfm-8q02ugey.log", "log /tmp/rfm-XXXXXXXX.log"),
        ("report /tmp/fleet -o /tmp/fleet-report", "report ~/fleet -o ~/fleet-report"),
        ("flock /tmp/tb-slurm.lock pytest", "flock /tmp/tb-slurm.lock pytest"),
    ],
)  # fmt: skip
def test_captured_output_shows_what_a_user_sees(captured: str, shown: str) -> None:
    assert user_paths(captured) == shown
    assert not MACHINE_PATH.search(shown)
    assert MACHINE_PATH.search(captured) or captured == shown


def test_this_checkout_is_replaced_wherever_it_is() -> None:
    assert user_paths(f"{REPO}/kernels/bin/whereami") == "/path/to/topobind/kernels/bin/whereami"
    assert user_paths("/home/ci/src/topobind/x", Path("/home/ci/src/topobind")) == (
        "/path/to/topobind/x"
    )


@pytest.mark.parametrize("script", sorted((REPO / "scripts").glob("gen-*-doc.py")))
def test_every_doc_generator_replaces_machine_paths(script: Path) -> None:
    assert "user_paths(" in script.read_text(), f"{script.name} does not call user_paths"
