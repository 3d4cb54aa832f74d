"""Every ReFrame check records the load it ran under (issue 30 item 5): ``probe.py load``
wraps the main command and writes load.json; a check warns when other work shared the node and
fails with ``-S strict_load=true``."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import REPO
from slurm_helpers import SlurmCluster, sbatch_wait, slurm_cluster  # noqa: F401  (fixture)

PROBE = REPO / "reframe_tests" / "topobind_rfm" / "probe.py"
SPIN = "import time\nt = time.monotonic() + 120\nwhile time.monotonic() < t:\n    pass\n"


@pytest.fixture
def spinners() -> Iterator[None]:
    """Other work on every CPU of this machine (busy loops), stopped at the end."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_probe_load_sees_other_work_and_keeps_the_exit_status(
    tmp_path: Path, spinners: None
) -> None:
    out = tmp_path / "load.json"
    cmd = [sys.executable, str(PROBE), "load", str(out), "--", "sh", "-c", "sleep 1; exit 7"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr
    load = json.loads(out.read_text())
    assert load["busy"] is True and load["others_share"] > 0.25, load
    assert load["cpus"] == os.cpu_count() and load["seconds"] >= 1.0


def test_probe_load_subtracts_the_commands_own_cpu_time(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    spin = "import time\nwhile time.process_time() < 0.5:\n    pass\n"  # 0.5 CPU-s, busy or not
    cmd = [sys.executable, str(PROBE), "load", str(out), "--", sys.executable, "-c", spin]
    subprocess.run(cmd, check=True, timeout=60)
    load = json.loads(out.read_text())
    assert load["own_cpu_seconds"] >= 0.5, load  # the command's CPU time is its own


def probe_in_a_job(cluster: SlurmCluster, tmp_path: Path, step: str) -> dict:
    """load.json of ``probe.py load`` around ``srun -n1 STEP`` in a batch job: the step's task
    is a child of the step's slurmstepd, not of the job script or the probe."""
    out = tmp_path / "load.json"
    script = tmp_path / "job.sh"
    script.write_text(
        f"#!/bin/bash\n{sys.executable} {PROBE} load {out} -- srun -n1 --cpu-bind=none {step}\n"
    )
    job = sbatch_wait(script, "--time=2", cluster=cluster, workdir=tmp_path, timeout=180)
    assert job.ok, job.describe()
    return json.loads(out.read_text())


def test_an_srun_step_of_the_job_is_its_own_work(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The step's task spins 1.5 CPU-seconds outside the probe's process tree: it is the
    job's own CPU time, never other work (it was: a check alone on a quiet node recorded up
    to 92 % of other work), however busy the machine is."""
    spin = "import time\nwhile time.process_time() < 1.5:\n    pass\n"
    load = probe_in_a_job(slurm_cluster, tmp_path, f"{sys.executable} -c {shlex.quote(spin)}")
    assert load["own_by"]["job"] >= 1.3, load  # the last sample period may be lost
    assert load["own_cpu_seconds"] >= 1.4, load


def test_a_loop_beside_the_job_is_other_work(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A 'while :; do :; done' of someone else while the job's step sleeps: other work."""
    loop = subprocess.Popen(["bash", "-c", "while :; do :; done"])
    try:
        load = probe_in_a_job(slurm_cluster, tmp_path, "sleep 3")
    finally:
        loop.kill()
        loop.wait()
    assert load["others_cpus"] >= 0.5 and load["busy"], load
    assert load["own_cpu_seconds"] < 1.0, load  # the loop is not the job's


@pytest.mark.slow
def test_a_check_under_load_warns_and_fails_with_strict_load(
    tmp_path: Path, spinners: None
) -> None:
    env = {**os.environ, "TOPOBIND_SITE": "local", "TOPOBIND_REFRAME_RESULTS": str(tmp_path)}
    base = [
        str(Path(sys.executable).parent / "reframe"),
        "-C", str(REPO / "site_configs" / "reframe_config.py"),
        "-c", str(REPO / "reframe_tests" / "stream.py"),
        "--system", "local:default", "-n", "StreamCheck%layout=compact",
        "-S", "elements=256K", "-S", "trials=3",
    ]  # fmt: skip
    runs = {}
    for strict in ("false", "true"):
        o = tmp_path / strict
        argv = [*base, "-S", f"strict_load={strict}", "-o", str(o), "-s", str(o / "s"), "-r"]
        runs[strict] = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    warned = runs["false"]
    assert warned.returncode == 0, warned.stdout[-2000:]
    assert "other processes kept" in warned.stdout and "not the node's own" in warned.stdout
    (load,) = (tmp_path / "false").rglob("load.json")
    assert json.loads(load.read_text())["busy"] is True
    (label,) = (tmp_path / "false").rglob("topobind-check.json")
    assert json.loads(label.read_text()) == {"check": "StreamCheck", "variant": "compact"}
    failed = runs["true"]
    assert failed.returncode != 0 and "strict_load" in failed.stdout, failed.stdout[-2000:]
