"""The tutorial "Your first bound job" runs as written and prints what the page shows.

docs/tutorials/first-bound-job.md marks its blocks with an HTML comment:
``<!-- tutorial: file NAME -->`` (the job script: written to ~/job/NAME, /path/to/topobind
being this checkout), ``<!-- tutorial: one-node -->`` (each ``$`` command runs in ~/job,
HOME being a temporary folder), ``<!-- tutorial: exact -->`` (output compared byte for
byte) and ``<!-- tutorial: three-nodes -->`` (the script submitted on the local 3-node
cluster, its output compared with the lines after ``$ cat``). Outputs are compared in the
parts that do not depend on the machine: numbers, the host name, the THP mode, the
OMPI_ALLOW_RUN_AS_ROOT lines (root only) and the column widths are masked.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import venv_bin
from paths import REPO
from slurm_helpers import SlurmCluster, sbatch_wait, slurm_cluster3  # noqa: F401  (fixture)
from tutorial_pages import SRUN_WAITED

sys.path.insert(0, str(REPO / "scripts"))
from docpaths import user_paths  # noqa: E402

PAGE = REPO / "docs" / "tutorials" / "first-bound-job.md"
BLOCK = re.compile(r"<!-- tutorial: (\S+)(?: (\S+))? -->\n```\w*\n(.*?)```\n", re.S)


def blocks(kind: str) -> list[tuple[str | None, str]]:
    return [(m[2], m[3]) for m in BLOCK.finditer(PAGE.read_text()) if m[1] == kind]


def commands(block: str) -> list[tuple[str, list[str]]]:
    """[(command, the page's output lines)] of a console block."""
    out: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            assert out, f"output before any command in {PAGE.name}: {line}"
            out[-1][1].append(line)
    return out


def normalize(lines: list[str], hosts: tuple[str, ...]) -> list[str]:
    """The lines without what depends on the machine."""
    out: list[str] = []
    for line in lines:
        if "OMPI_ALLOW_RUN_AS_ROOT" in line or SRUN_WAITED.fullmatch(line.strip()):
            continue
        for host in hosts:
            line = re.sub(rf"(?<![\w-]){re.escape(host)}(?![\w-])", "HOST", line)
        line = re.sub(r"THP \w+ \(defrag \w+\)", "THP MODE", line)
        line = " ".join(re.sub(r"\d+", "N", line).split())
        if line.startswith("topobind: NUMA node") and out and out[-1] == line:
            continue  # one line per NUMA node
        out.append(line)
    return out


def seen(text: str, home: Path) -> list[str]:
    """Output as a user sees it: ~ for HOME, no path of this machine."""
    return user_paths(text.replace(str(home), "~"), REPO).splitlines()


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    ((name, script),) = blocks("file")
    job = tmp_path / "job"
    job.mkdir()
    assert name
    (job / name).write_text(script.replace("/path/to/topobind", str(REPO)))
    return job


def test_the_page_starts_with_the_job_script() -> None:
    first_screen = "\n".join(PAGE.read_text().splitlines()[:12])
    assert "```bash\n#!/bin/bash" in first_screen
    assert len(blocks("file")) == 1 and blocks("one-node") and blocks("three-nodes")
    assert blocks("exact")


def test_normalize_keeps_what_does_not_depend_on_the_machine() -> None:
    a = normalize(["topobind: verify: all 2 threads on their planned CPUs"], ("vm",))
    b = normalize(["topobind: verify: 1 of 2 threads off their planned CPUs"], ("vm",))
    assert a != b
    assert normalize(["   0  vm    bind 0 thp"], ("vm",)) == normalize(
        [" 1 node042 bind 3 thp"], ("node042",)
    )


@pytest.mark.slow
def test_one_node_part_runs_as_shown(job_dir: Path, built_kernels: None) -> None:
    home = job_dir.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(HOME=str(home), PATH=f"{venv_bin('topobind').parent}:{env['PATH']}")
    hosts = (socket.gethostname().split(".")[0],)
    for _, block in blocks("one-node"):
        for command, shown in commands(block):
            if command.startswith("cd "):
                assert command == "cd ~/job"
                continue
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=job_dir,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, f"{command}:\n{done.stdout}"
            got = seen(done.stdout, home)
            assert normalize(got, hosts) == normalize(shown, hosts), f"$ {command}"


@pytest.mark.slow
def test_exact_blocks_print_exactly_what_the_page_shows(tmp_path: Path) -> None:
    for _, block in blocks("exact"):
        for command, shown in commands(block):
            args = command.split()
            assert args[0] == "topobind"
            done = subprocess.run(
                [str(venv_bin("topobind")), *args[1:]],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stdout
            assert done.stdout.splitlines() == shown, f"$ {command}"


@pytest.mark.slow
def test_three_node_part_runs_as_shown(
    job_dir: Path,
    slurm_cluster3: SlurmCluster,  # noqa: F811
    built_kernels: None,
) -> None:
    ((_, block),) = blocks("three-nodes")
    steps = commands(block)
    assert [c for c, _ in steps[:3]] == [
        "cd /path/to/topobind && scripts/local-slurm start --nodes 3",  # the fixture's work
        'eval "$(scripts/local-slurm env)"',
        "cd ~/job && sbatch --wait --nodes=3 first.sbatch",
    ]
    assert re.fullmatch(r"cat first-\d+\.out", steps[3][0])
    job = sbatch_wait(
        job_dir / "first.sbatch", "--nodes=3", cluster=slurm_cluster3, workdir=job_dir,
        timeout=240,
    )  # fmt: skip
    assert job.ok, job.describe()
    hosts = tuple(slurm_cluster3.nodes)
    got = seen(job.output, job_dir.parent)
    assert normalize(got, hosts) == normalize(steps[3][1], hosts)
