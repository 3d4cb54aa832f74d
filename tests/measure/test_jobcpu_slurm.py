"""measure/jobcpu.py's Sampler inside a real Slurm job of the 3 local nodes: an ``srun``
step's tasks are children of the step's slurmstepd, not of the process that ran srun, so
getrusage misses them; the sampler counts them as the job's own work (what validate's checks
and each ``topobind tune`` run inside an allocation subtract from the host's busy time).
Without it, three ranks burning CPU made a quiet host look 93 % busy. Root and the local
cluster; tests/validation/test_load.py tests the same rules on synthetic /proc samples."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from slurm_helpers import SlurmCluster, sbatch_wait, slurm_cluster3  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.root]

#: each task burns CPU (not wall time: the figure holds on a busy machine) and prints its
#: own CPU-seconds, the work the sampler must find
TASK = ("import json, time; s = 0\n"
        "for i in range(4_000_000): s += i\n"
        "print(json.dumps({'task_cpu': time.process_time()}))\n")  # fmt: skip

MEASURE = """import json, os, subprocess, sys
from topobind.measure.cpuload import cpu_sample, load_between
from topobind.measure.jobcpu import Sampler
steps = Sampler(os.getpid(), os.environ["SLURM_JOB_ID"], None)
before = cpu_sample()
steps.start()
done = subprocess.run(["srun", "-N3", "-n3", sys.executable, sys.argv[1]],
                      capture_output=True, text=True)
steps.stop()
after = cpu_sample()
tasks = [json.loads(ln)["task_cpu"] for ln in done.stdout.splitlines()]
print(json.dumps({"rc": done.returncode, "err": done.stderr[-2000:], "tasks": tasks,
                  "steps_s": steps.seconds()[0], "error": steps.error,
                  "host_alone": load_between(before, after).others_cpus,
                  "with_steps": load_between(before, after, steps.seconds()[0]).others_cpus}))
"""


def test_the_steps_tasks_on_this_node_are_the_jobs_own_work(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    (tmp_path / "task.py").write_text(TASK)
    (tmp_path / "measure.py").write_text(MEASURE)
    script = tmp_path / "job.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH -N 3 --ntasks-per-node=1 --exclusive --time=5\n"
        f"{sys.executable} {tmp_path}/measure.py {tmp_path}/task.py > {tmp_path}/out.json\n"
    )
    job = sbatch_wait(script, cluster=slurm_cluster3, workdir=tmp_path, timeout=600)
    assert job.ok, job.describe()
    got = json.loads((tmp_path / "out.json").read_text())
    assert got["rc"] == 0 and len(got["tasks"]) == 3 and got["error"] == "", got
    work = sum(got["tasks"])  # the three tasks' own CPU-seconds (each well over 0.1 s)
    # all three "nodes" share this host: every task is the job's, found by the sampler
    # (clock ticks of 10 ms; the steps' slurmstepd add a little of their own)
    assert 0.8 * work <= got["steps_s"] <= work + 1.0, got
    # and taken off the host's busy time (exactly steps_s over the wall time, less where
    # the host rule alone is capped at the CPUs on a busy machine)
    assert got["with_steps"] < got["host_alone"], got
