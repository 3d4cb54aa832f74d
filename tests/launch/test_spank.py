"""The Slurm SPANK plugin (rankstep/bin/topobind_spank.so): ``srun --topobind=LAYOUT`` on the
local 3-node cluster places every task with no wrapper, and ``topobind verify`` agrees; the
step file it reads (``topobind plan --format rankexec --slurm-cores``); its errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import TOPOBIND, run_topobind
from paths import REPO
from slurm_helpers import (
    MULTI_SLURMD_TIMEOUT,
    SlurmCluster,
    run_script,
    sbatch_wait,
    slurm_cluster3,  # noqa: F401  (fixture)
)

WHEREAMI = REPO / "kernels" / "bin" / "whereami"
RANKSTEP = REPO / "rankstep"
HAVE_HEADER = Path("/usr/include/slurm/spank.h").exists()


def plan_rankexec(*args: str) -> subprocess.CompletedProcess[str]:
    return run_topobind("plan", "--format", "rankexec", *args, timeout=60)


def step_lines(text: str) -> list[list[str]]:
    """The rank lines of a step file, split into fields."""
    return [line.split("\t") for line in text.splitlines() if line[:1].isdigit()]


# ------------------------------------------------------------------ the step file
@pytest.mark.slow
def test_rankexec_format_plans_on_slurms_cores() -> None:
    """betzy-epyc7742 numbers core i's PUs i and i+128: Slurm's cores 4-7 are PUs 4-7 (first
    PU of each core) or 4-7 and 132-135 with --smt."""
    out = plan_rankexec(
        "-t", "betzy-epyc7742", "--layout", "spread", "--ranks", "2", "--threads", "2",
        "--slurm-cores", "4-7", "--mem", "none",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "topobind-rankexec 2"  # no memory fields: version 2
    assert "@*" in out.stdout.splitlines()
    assert step_lines(out.stdout) == [
        ["0", "%cpus=4-5", "OMP_NUM_THREADS=2", "OMP_PLACES={4},{5}", "OMP_PROC_BIND=close"],
        ["1", "%cpus=6-7", "OMP_NUM_THREADS=2", "OMP_PLACES={6},{7}", "OMP_PROC_BIND=close"],
    ]
    smt = plan_rankexec(
        "-t", "betzy-epyc7742", "--layout", "compact", "--ranks", "1", "--threads", "4",
        "--smt", "--slurm-cores", "4-5",
    )  # fmt: skip
    assert smt.returncode == 0, smt.stderr
    assert step_lines(smt.stdout)[0][1] == "%cpus=4-5,132-133"


@pytest.mark.slow
@pytest.mark.parametrize(
    "cores,message",
    [
        ("4-7,200", "cores 200 are not on this node (128 cores, 0-127)"),
        ("0-99999999999", "give a core list such as 0-3,8"),
        ("7-4", "cores 7-4 are not on this node"),
        ("x", "give a core list such as 0-3,8"),
    ],
)
def test_rankexec_bad_slurm_cores(cores: str, message: str) -> None:
    out = plan_rankexec("-t", "betzy-epyc7742", "--layout", "spread", "--slurm-cores", cores)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.startswith("topobind: error: --slurm-cores")
    assert message in out.stderr
    assert "Traceback" not in out.stderr


# ------------------------------------------------------------------ the plugin on Slurm
def build_plugin(*make_args: str) -> None:
    out = subprocess.run(
        ["make", "-s", "-C", str(RANKSTEP), "spank", *make_args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.fixture(scope="module")
def spank3(slurm_cluster3: SlurmCluster) -> Iterator[SlurmCluster]:  # noqa: F811
    """The 3-node cluster with the plugin in its plugstack.conf (start --spank on the
    running cluster: srun and slurmstepd read the file at every step)."""
    if not HAVE_HEADER or not WHEREAMI.exists():
        pytest.skip("needs slurm/spank.h (libslurm-dev) and 'make kernels'")
    build_plugin()
    out = run_script(
        "start",
        slurm_cluster3.state_dir,
        args=["--nodes", "3", "--spank"],
        env={"TOPOBIND_SLURMD_TIMEOUT": str(MULTI_SLURMD_TIMEOUT)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "topobind_spank.so" in (slurm_cluster3.state_dir / "plugstack.conf").read_text()
    yield slurm_cluster3


def srun(cluster: SlurmCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """srun on the cluster, without any OMP_* or TOPOBIND_SPANK* variable of the caller's."""
    env = {k: v for k, v in cluster.env.items() if not k.startswith(("OMP_", "TOPOBIND_SPANK"))}
    return subprocess.run(
        ["srun", *args], capture_output=True, text=True, env=env, timeout=120, cwd="/tmp"
    )


def whereami_docs(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def masks(text: str) -> dict[tuple[str, int], list[int]]:
    """{(host, rank): the affinity of the rank's first thread} from whereami's lines."""
    return {(d["host"], d["rank"]): d["placement"][0]["affinity"] for d in whereami_docs(text)}


@pytest.mark.slow
@pytest.mark.root
def test_spread_places_every_task_and_verify_agrees(spank3: SlurmCluster) -> None:
    out = srun(spank3, "-N3", "-n6", "--topobind=spread", str(WHEREAMI))
    assert out.returncode == 0, out.stderr
    docs = whereami_docs(out.stdout)
    assert len(docs) == 6
    for d in docs:
        cpu = d["rank"] % 2  # two tasks per node: local task 0 on CPU 0, 1 on CPU 1
        assert d["placement"][0]["affinity"] == [cpu], d
        assert d["params"]["OMP_PLACES"] == f"{{{cpu}}}"
        assert d["params"]["OMP_PROC_BIND"] == "close"
        assert d["params"]["OMP_NUM_THREADS"] == "1"
    assert {d["host"] for d in docs} == {"node1", "node2", "node3"}
    verify = spank3.run(
        [str(TOPOBIND), "verify", "--layout", "spread", "--ranks", "2", "--nodes", "3", "--",
         "srun", "-N3", "-n6", "--topobind=spread"],
        timeout=120, cwd="/tmp",
    )  # fmt: skip
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "6 of 6 threads bound to their planned CPU" in verify.stdout


@pytest.mark.slow
@pytest.mark.root
def test_plugin_mask_replaces_task_affinity(spank3: SlurmCluster) -> None:
    """-c 2: task/affinity binds each task to both cores; every-other-core with one thread
    puts it on core 0 only, and verify agrees; the plain step fails the same verify."""
    plain = srun(spank3, "-N2", "-n2", "-c2", str(WHEREAMI))
    assert plain.returncode == 0, plain.stderr
    assert set(map(tuple, masks(plain.stdout).values())) == {(0, 1)}
    placed = srun(spank3, "-N2", "-n2", "-c2", "--topobind=every-other-core:threads=1",
                  str(WHEREAMI))  # fmt: skip
    assert placed.returncode == 0, placed.stderr
    assert masks(placed.stdout) == {("node1", 0): [0], ("node2", 1): [0]}
    base = [str(TOPOBIND), "verify", "--layout", "every-other-core", "--ranks", "1",
            "--threads", "1", "--nodes", "2", "--", "srun", "-N2", "-n2", "-c2"]  # fmt: skip
    ok = spank3.run([*base, "--topobind=every-other-core:threads=1"], timeout=120, cwd="/tmp")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = spank3.run(base, timeout=120, cwd="/tmp")
    assert bad.returncode != 0 and "MISMATCH" in bad.stdout


@pytest.mark.slow
@pytest.mark.root
def test_each_node_plans_its_own_share(spank3: SlurmCluster, tmp_path: Path) -> None:
    """Another job holds core 0 of node3; a job of 5 tasks on 3 nodes then holds 2 cores on
    node1 and node2 and core 1 on node3: node3's one task is planned on core 1 (CPU 1), and
    topobind verify (a plan per group of nodes) agrees."""
    holder = spank3.run(
        ["sbatch", "--parsable", "-w", "node3", "-n1", "-o", "/dev/null", "--wrap", "sleep 120"],
        timeout=60,
    )
    assert holder.returncode == 0, holder.stderr
    try:
        script = tmp_path / "job.sh"
        script.write_text(
            "#!/bin/bash\n"
            f"{TOPOBIND} verify --layout spread -- srun --topobind=spread || exit 3\n"
            f"srun --topobind=spread {WHEREAMI}\n"
        )
        job = sbatch_wait(script, "-N3", "-n5", cluster=spank3, workdir=tmp_path, timeout=240)
    finally:
        spank3.run(["scancel", holder.stdout.strip()], timeout=60)
    assert job.ok, job.describe()
    assert "5 of 5 threads bound to their planned CPU" in job.output
    assert masks(job.output) == {
        ("node1", 0): [0], ("node1", 1): [1], ("node2", 2): [0], ("node2", 3): [1],
        ("node3", 4): [1],
    }  # fmt: skip


@pytest.mark.slow
@pytest.mark.root
def test_unknown_layout_fails_the_step(spank3: SlurmCluster) -> None:
    """srun checks the layout (topobind plan --check) before the step starts: one line."""
    out = srun(spank3, "-N3", "-n3", "--topobind=bogus", str(WHEREAMI))
    assert out.returncode != 0
    assert out.stdout == ""  # no task ran unbound
    plugin_lines = [ln for ln in out.stderr.splitlines() if "topobind" in ln]
    assert plugin_lines[0] == (
        "srun: error: topobind: unknown layout 'bogus'; choose one of: compact, spread, "
        "every-other-core, per-l3, per-numa, per-socket, l3-groups:N, per-gpu"
    )
    assert len([ln for ln in plugin_lines if "unknown layout" in ln]) == 1
    bad_opt = srun(spank3, "-n1", "--topobind=spread:frob=2", str(WHEREAMI))
    assert bad_opt.returncode != 0 and bad_opt.stdout == ""
    assert "srun: error: topobind: unrecognized arguments: --frob=2 " in bad_opt.stderr


@pytest.mark.slow
@pytest.mark.root
def test_layout_size_and_options(spank3: SlurmCluster) -> None:
    """l3-groups:2 is a layout with its size, not an option; threads=2 an option."""
    show = 'echo "$OMP_PLACES $OMP_NUM_THREADS"; grep Cpus_allowed_list /proc/self/status'
    out = srun(spank3, "-N1", "-n1", "-c2", "--topobind=l3-groups:2:threads=2", "bash", "-c", show)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["{0},{1}", "2", "Cpus_allowed_list:", "0-1"]


@pytest.mark.slow
@pytest.mark.root
def test_a_plan_that_cannot_fit_fails_the_step(spank3: SlurmCluster) -> None:
    """-c 2 asks 2 threads per task; every-other-core has 1 core of the 2: planning fails on
    the node and its tasks exit 1 with topobind's message."""
    out = srun(spank3, "-N1", "-n1", "-c2", "--topobind=every-other-core", str(WHEREAMI))
    assert out.returncode != 0
    assert out.stdout == ""
    assert "topobind: error: 1 ranks x 2 threads = 2 but this layout has only 1 usable" in (
        out.stderr
    )


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize(
    "value,message",
    [
        ("spread;rm", "give LAYOUT[:NAME=VALUE,...]"),
        ("", "give LAYOUT[:NAME=VALUE,...]"),
        ("Spread", "give LAYOUT[:NAME=VALUE,...]"),
        ("spread:threads=2;x", "option 'threads=2;x' is not NAME or NAME=VALUE"),
        ("spread:ranks=4", "option 'ranks' is set by the plugin from the step"),
        ("spread:top=/etc/passwd", "option 'top' is set by the plugin from the step"),
        ("spread:slurm-cores=0-1", "option 'slurm-cores' is set by the plugin from the step"),
        # issue 31 item 4: was "unrecognized arguments: ---1" from topobind plan on the node
        ("l3-groups:-1", "'-1' is neither a size (a layout's size is a positive number"),
    ],
)
def test_malformed_option_is_refused_by_srun(
    spank3: SlurmCluster, value: str, message: str
) -> None:
    out = srun(spank3, "-n1", f"--topobind={value}", str(WHEREAMI))
    assert out.returncode != 0
    assert out.stdout == ""
    assert f"srun: error: topobind: --topobind={value}: " in out.stderr
    assert message in out.stderr


@pytest.mark.slow
@pytest.mark.root
def test_without_the_option_the_plugin_does_nothing(spank3: SlurmCluster) -> None:
    show = "env | grep -c '^TOPOBIND_SPANK\\|^OMP_' ; grep Cpus_allowed_list /proc/self/status"
    out = srun(spank3, "-N1", "-n1", "-c2", "bash", "-c", show)
    assert out.returncode == 0, out.stderr
    count, allowed = out.stdout.splitlines()
    assert count == "0"  # no variable of the plugin's
    assert allowed.split()[-1] == "0-1"  # task/affinity's mask of the two cores, untouched


@pytest.mark.slow
@pytest.mark.root
def test_plugin_of_another_slurm_is_refused(spank3: SlurmCluster, tmp_path: Path) -> None:
    """Built with slurm_version.h saying 23.02 (and libslurm API 39): srun refuses the
    plugin, Slurm naming the plugin's version and the plugin naming both."""
    inc = tmp_path / "inc" / "slurm"
    shutil.copytree("/usr/include/slurm", inc)
    header = inc / "slurm_version.h"
    text = header.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("#define SLURM_VERSION_NUMBER"))
    header.write_text(text.replace(line, "#define SLURM_VERSION_NUMBER 0x170200"))
    so = tmp_path / "topobind_spank.so"
    build_plugin(f"SLURM_INCLUDE={tmp_path / 'inc'}", "SLURM_API=39", f"PLUGIN={so}")
    conf = tmp_path / "slurm.conf"
    stack = tmp_path / "plugstack.conf"
    stack.write_text(f"required {so} topobind={TOPOBIND}\n")
    conf.write_text(
        "".join(
            f"PlugStackConfig={stack}\n" if ln.startswith("PlugStackConfig=") else ln + "\n"
            for ln in spank3.conf.read_text().splitlines()
        )
    )
    out = subprocess.run(
        ["srun", "-n1", "--topobind=spread", "true"],
        capture_output=True,
        text=True,
        env={**spank3.env, "SLURM_CONF": str(conf)},
        timeout=60,
        cwd="/tmp",
    )
    assert out.returncode != 0
    assert (
        "topobind_spank: error: built for Slurm 23.02 (libslurm API 39), but this Slurm's "
        "libslurm API is " in out.stderr
    )
    assert f"Incompatible Slurm plugin {so} version (23.02.0)" in out.stderr
    assert "Failed to load plugin" in out.stderr
    assert os.path.exists(so)


def srun_with_planner(
    cluster: SlurmCluster, tmp_path: Path, step_file: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """srun with a stand-in planner in plugstack.conf that prints STEP_FILE: for what the real
    planner never writes on this machine (a CPU it lacks; memory fields of several NUMA
    nodes). The file is restored after the step."""
    planner = tmp_path / "planner"
    text = (
        step_file.replace("\\", "\\\\")
        .replace("\n", "\\n")
        .replace("\t", "\\t")
        .replace("\x00", "\\000")
    )
    planner.write_text(f"#!/bin/sh\nprintf '{text.replace('%', '%%')}'\n")
    planner.chmod(0o755)
    stack = cluster.state_dir / "plugstack.conf"
    saved = stack.read_text()
    stack.write_text(saved.replace(f"topobind={TOPOBIND}", f"topobind={planner}"))
    try:
        return srun(cluster, *args)
    finally:
        stack.write_text(saved)


@pytest.mark.slow
@pytest.mark.root
def test_a_cpu_the_task_cannot_use_fails_it(spank3: SlurmCluster, tmp_path: Path) -> None:
    """A step file naming a CPU this node does not have (as a cgroup cpuset would hide one):
    the kernel binds the task to the rest, the plugin reads the mask back and fails it."""
    step = "topobind-rankexec 2\n@*\n0\t%cpus=0,1000\tOMP_NUM_THREADS=1\n"
    out = srun_with_planner(spank3, tmp_path, step, "-N1", "-n1", "--topobind=spread",
                            str(WHEREAMI))  # fmt: skip
    assert out.returncode != 0
    assert out.stdout == ""
    assert (
        "topobind: error: local task 0: CPU 1000 of the planned CPUs 0,1000 is outside the CPUs "
        "this task may use here" in out.stderr
    )


@pytest.mark.slow
@pytest.mark.root
def test_a_nul_in_the_planners_step_file_fails_the_step(
    spank3: SlurmCluster, tmp_path: Path
) -> None:
    """Issue 47: a NUL ended a task's line (`0<NUL><TAB>%cpus=1`: the task ran unbound). The
    plugins' plan reader takes the step file's rule (tb_step_check_text): one line naming
    the line and column, the step fails, nothing runs."""
    step = "topobind-rankexec 2\n@*\n0\x00\t%cpus=0\tOMP_NUM_THREADS=1\n"
    out = srun_with_planner(spank3, tmp_path, step, "-N1", "-n1", "--topobind=spread",
                            "echo", "ran")  # fmt: skip
    assert out.returncode != 0 and "ran" not in out.stdout, out
    assert "step file, line 3, column 2: control byte 0x00 (NUL)" in out.stderr, out.stderr


@pytest.mark.slow
@pytest.mark.root
def test_memory_fields_of_version_3_lines(spank3: SlurmCluster, tmp_path: Path) -> None:
    """%mem= (set_mempolicy), %thp=off (prctl) and %preload= (first in LD_PRELOAD), as
    rankexec applies them, kept across the task's exec."""
    lib = "/lib/x86_64-linux-gnu/libc.so.6"
    step = (
        "topobind-rankexec 3\n@*\n"
        f"0\t%cpus=1\t%mem=bind:0\t%thp=off\t%preload={lib}\tOMP_NUM_THREADS=1\n"
        f"1\t%cpus=0\t%mem=interleave:0\tOMP_NUM_THREADS=1\n"
    )
    show = (
        'echo "$SLURM_LOCALID $(taskset -cp $$ | sed "s/.*: //") '
        '$(head -1 /proc/self/numa_maps | cut -d" " -f2) '
        '$(sed -n "s/THP_enabled:\\s*//p" /proc/self/status) $LD_PRELOAD"'
    )
    out = srun_with_planner(spank3, tmp_path, step, "-N1", "-n2", "--topobind=spread",
                            "--export=ALL,LD_PRELOAD=", "bash", "-c", show)  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = sorted(ln.strip() for ln in out.stdout.splitlines())
    assert lines == [f"0 1 bind:0 0 {lib}", "1 0 interleave:0 1"]
    bad = "topobind-rankexec 3\n@*\n0\t%mem=bind:x\tOMP_NUM_THREADS=1\n"
    out = srun_with_planner(spank3, tmp_path, bad, "-n1", "--topobind=spread", "true")
    assert out.returncode != 0
    assert "topobind: error: local task 0: malformed memory policy bind:x" in out.stderr
    # a node the kernel drops from the mask (issue 31 item 2): read back, the task refused
    narrowed = "topobind-rankexec 3\n@*\n0\t%mem=interleave:0,1000\tOMP_NUM_THREADS=1\n"
    out = srun_with_planner(spank3, tmp_path, narrowed, "-n1", "--topobind=spread", "true")
    assert out.returncode != 0
    assert (
        "topobind: error: local task 0: memory policy interleave:0,1000: the kernel dropped "
        "NUMA node 1000 (not on this node, or not allowed to this task: cpuset) and kept "
        "interleave:0; refused" in out.stderr
    )


@pytest.mark.slow
@pytest.mark.root
def test_topology_argument_per_node(spank3: SlurmCluster, tmp_path: Path) -> None:
    """topology=DIR/%n.xml: each node plans on its own exported XML (no lstopo per step); a
    node without one fails its tasks with topobind's line."""
    xml = subprocess.run(
        ["lstopo-no-graphics", "--of", "xml", "--disallowed"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    for node in ("node1", "node2"):
        (tmp_path / f"{node}.xml").write_text(xml)
    stack = spank3.state_dir / "plugstack.conf"
    saved = stack.read_text()
    line = next(ln for ln in saved.splitlines() if "topobind_spank.so" in ln)
    stack.write_text(saved.replace(line, f"{line} topology={tmp_path}/%n.xml"))
    try:
        ok = srun(spank3, "-N2", "-w", "node[1-2]", "-n4", "--topobind=spread", str(WHEREAMI))
        missing = srun(spank3, "-N1", "-w", "node3", "-n1", "--topobind=spread", str(WHEREAMI))
    finally:
        stack.write_text(saved)
    assert ok.returncode == 0, ok.stderr
    assert masks(ok.stdout) == {
        ("node1", 0): [0], ("node1", 1): [1], ("node2", 2): [0], ("node2", 3): [1],
    }  # fmt: skip
    assert missing.returncode != 0 and missing.stdout == ""
    assert f"topobind: error: topology file '{tmp_path}/node3.xml' does not exist" in (
        missing.stderr
    )


@pytest.mark.slow
@pytest.mark.root
def test_the_batch_jobs_cpus_per_task_reach_the_plan(spank3: SlurmCluster, tmp_path: Path) -> None:
    """#SBATCH --cpus-per-task=2, then srun --topobind=per-l3: Slurm 22.05's srun does not pass
    -c to the step (S_STEP_CPUS_PER_TASK is 1), but the step holds both cores for its one task,
    as the plain step's task shows; the plan gives the task both (it gave 1 thread, 1 CPU,
    without a word). A plan that uses fewer says so, once per node."""
    script = tmp_path / "job.sh"
    show = 'echo "$0: CPUs $(taskset -cp $$ | sed "s/.*: //") OMP_NUM_THREADS=$OMP_NUM_THREADS"'
    script.write_text(
        "#!/bin/bash\n"
        f"srun bash -c '{show}' plain\n"
        f"srun --topobind=per-l3 bash -c '{show}' per-l3\n"
        f"srun --topobind=compact:threads=1 bash -c '{show}' one\n"
    )
    job = sbatch_wait(script, "-N1", "-n1", "--cpus-per-task=2", cluster=spank3,
                      workdir=tmp_path, timeout=240)  # fmt: skip
    assert job.ok, job.describe()
    lines = job.output.splitlines()
    assert "plain: CPUs 0,1 OMP_NUM_THREADS=" in job.output, job.output
    assert "per-l3: CPUs 0,1 OMP_NUM_THREADS=2" in lines, job.output
    assert "one: CPUs 0 OMP_NUM_THREADS=1" in lines, job.output
    notes = [ln for ln in lines if ln.startswith("topobind: note:")]
    assert notes == [
        "topobind: note: --topobind=compact:threads=1 gives local task 0 1 CPU of the 2 the "
        "step holds for each task; the others stay idle (threads=T, or srun -c, to change it)"
    ], job.output
