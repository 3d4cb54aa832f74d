"""The project's local one-node Slurm cluster for tests (scripts/local-slurm).

Use the session fixture ``local_slurm`` (tests/conftest.py): it starts the cluster when
needed (root only; skips otherwise), yields the environment with SLURM_CONF set, and stops
the cluster at the end of the session if it started it. ``sbatch_wait`` submits a script
with ``sbatch --wait`` and returns the job's state, exit code and output.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "local-slurm"


@dataclass(frozen=True)
class CompletedJob:
    job_id: int
    returncode: int  # sbatch --wait's exit status (the job's exit code, 0 when it succeeded)
    output: str


def slurm_env() -> dict[str, str]:
    out = subprocess.run([str(SCRIPT), "env"], capture_output=True, text=True, check=True)
    conf = re.search(r"SLURM_CONF=(\S+)", out.stdout)
    assert conf
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = conf.group(1).strip("'")
    return env


def is_running() -> bool:
    return subprocess.run([str(SCRIPT), "status"], capture_output=True).returncode == 0


def start() -> None:
    subprocess.run([str(SCRIPT), "start"], check=True, capture_output=True, timeout=180)


def stop() -> None:
    subprocess.run([str(SCRIPT), "stop"], check=True, capture_output=True, timeout=120)


def sbatch_wait(
    script: Path, workdir: Path, env: dict[str, str], *args: str, timeout: int = 300
) -> CompletedJob:
    out_file = workdir / "job-%j.out"
    proc = subprocess.run(
        [
            "sbatch",
            "--wait",
            "-D",
            str(workdir),
            "-o",
            str(out_file),
            "--export=ALL",
            *args,
            str(script),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    m = re.search(r"Submitted batch job (\d+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    job_id = int(m.group(1))
    text = (workdir / f"job-{job_id}.out").read_text()
    return CompletedJob(job_id=job_id, returncode=proc.returncode, output=text)
