"""scripts/topobind-healthcheck on its own (issue 37 item 17): it drains only on a finding of
``site check --live`` about this node; any other failure (a traceback, a crash, a bad site)
is logged and the node is left as it is. A logging stand-in for ``scontrol`` records every
call; the topobind it runs is the real one (a golden XML without NUMA nodes) or a stand-in
that fails as a bug would. tests/validation/test_healthcheck_slurm.py runs it under slurmd."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO

pytestmark = pytest.mark.slow
SCRIPT = REPO / "scripts" / "topobind-healthcheck"
TOPOBIND = Path(sys.executable).parent / "topobind"


Done = tuple[subprocess.CompletedProcess[str], list[str]]


def _run(tmp_path: Path, topobind: Path, golden: Path | None = None,
         node: str = "node-1.rack_2") -> Done:  # fmt: skip
    log = tmp_path / "scontrol.log"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$*" >> {log}\n'
                        'if [ "$1" = show ]; then echo "NodeName=$3 State=IDLE"; fi\n')  # fmt: skip
    scontrol.chmod(0o755)
    conf = tmp_path / "hc.conf"
    conf.write_text(
        f"TOPOBIND={topobind}\nTOPOBIND_SITE=local\nTOPOBIND_SITES_DIR={REPO / 'site_configs'}\n"
        + (f"TOPOBIND_GOLDEN={golden}\n" if golden else "")
        + "TOPOBIND_HEALTHCHECK_TIMEOUT=60\n"
    )
    env = {"PATH": os.environ["PATH"], "TOPOBIND_HEALTHCHECK_CONF": str(conf),
           "SCONTROL": str(scontrol), "SLURMD_NODENAME": node}  # fmt: skip
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip
    calls = log.read_text().splitlines() if log.exists() else []
    return done, calls


def _updates(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("update")]


@pytest.mark.parametrize(
    "body",
    ['echo "Traceback (most recent call last):" >&2; echo "ValueError: min()" >&2; exit 1',
     "exit 1", 'echo "topobind: error: site local: broken" >&2; exit 1',
     'echo "topobind: error: other-node: cores: expected 4, found 2 (x)" >&2; exit 1'],
)  # fmt: skip
def test_a_failure_that_is_no_finding_never_drains(tmp_path: Path, body: str) -> None:
    fake = tmp_path / "topobind"
    fake.write_text(f"#!/bin/bash\n{body}\n")
    fake.chmod(0o755)
    done, calls = _run(tmp_path, fake)
    assert done.returncode == 0, done.stderr
    assert "unbound variable" not in done.stderr
    assert _updates(calls) == []
    assert "failed without a finding (exit 1" in done.stderr and "nothing changed" in done.stderr


def test_a_finding_about_this_node_drains_it_with_a_dotted_name(tmp_path: Path) -> None:
    fake = tmp_path / "topobind"
    fake.write_text("#!/bin/bash\necho 'topobind: error: node-1.rack_2: cores: expected 4, "
                    "found 2 (golden.xml)' >&2\nexit 1\n")  # fmt: skip
    fake.chmod(0o755)
    done, calls = _run(tmp_path, fake)
    assert done.returncode == 0, done.stderr
    assert _updates(calls) == [
        "update nodename=node-1.rack_2 state=drain reason=topobind: cores: expected 4, found 2 "
        "(golden.xml)"
    ]


def test_a_golden_xml_without_numa_nodes_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    """The real topobind: a golden node without NUMA nodes was a min() traceback (exit 1),
    which the script then died on (an unbound variable) on its way to draining the node."""
    xml = subprocess.run(["lstopo-no-graphics", "--of", "xml"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    nonuma = re.sub(r'<object type="NUMANode"[^>]*/>\n?|<object type="NUMANode"[^>]*>.*?'
                    r"</object>\n?", "", xml, flags=re.S)  # fmt: skip
    assert "NUMANode" not in nonuma
    golden = tmp_path / "golden.xml"
    golden.write_text(nonuma)
    live = subprocess.run([str(TOPOBIND), "site", "check", "local", "--live", "--golden",
                           str(golden)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SLURMD_NODENAME": "node1"})  # fmt: skip
    assert "Traceback" not in live.stderr, live.stderr
    assert live.returncode == 1 and "node1: numa_nodes: expected 0, found" in live.stderr
    done, calls = _run(tmp_path, TOPOBIND, golden, node="node1")
    assert done.returncode == 0, done.stderr
    (update,) = _updates(calls)
    assert update.startswith("update nodename=node1 state=drain reason=topobind: numa_nodes: "
                             "expected 0, found 1"), update  # fmt: skip
