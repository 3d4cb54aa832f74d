"""`topobind run`, `topobind verify`, `topobind env` and the launcher scripts, run for real."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import NO_SLURM, TOPOBIND, run_topobind, venv_bin
from paths import KERNELS_BIN, REPO, TOPOLOGIES

WHEREAMI = KERNELS_BIN / "whereami"
RUN = str(REPO / "launchers" / "topobind-run")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first"),
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 PUs"),
]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), capture_output=True, text=True, env=NO_SLURM, cwd=cwd, timeout=120
    )


def placements(stdout: str) -> dict[tuple[int, int], int]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("{"):
            for p in json.loads(line)["placement"]:
                out[(p["rank"], p["thread"])] = p["cpu"]
    return out


def test_openmp_only_verified(tmp_path: Path) -> None:
    out = run(
        RUN, "--layout", "compact", "--threads", "2", "--verify", "--", str(WHEREAMI), cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "all 2 threads on their planned CPUs" in out.stderr
    assert placements(out.stdout) == {(0, 0): 0, (0, 1): 1}
    assert not list(tmp_path.iterdir()), "run left files behind"


@pytest.mark.parametrize("mpi", ["openmpi4", "openmpi5"])
def test_two_mpi_ranks_verified(mpi: str, tmp_path: Path) -> None:
    out = run(
        RUN,
        "--layout",
        "compact",
        "--ranks",
        "2",
        "--mpi",
        mpi,
        "--verify",
        "--",
        str(WHEREAMI),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert placements(out.stdout) == {(0, 0): 0, (1, 0): 1}


def test_arguments_pass_through_untouched(tmp_path: Path) -> None:
    args = ["a b", "$HOME", ";", "*", "'q'", ""]
    out = run(
        RUN, "--layout", "compact", "--ranks", "1", "--", "printf", "<%s>\n", *args, cwd=tmp_path
    )
    assert out.returncode == 0
    assert out.stdout.splitlines() == [f"<{a}>" for a in args]


@pytest.mark.parametrize("ranks", ["1", "2"])
def test_exit_status_passed_through(ranks: str, tmp_path: Path) -> None:
    out = run(RUN, "--ranks", ranks, "--", "sh", "-c", "exit 7", cwd=tmp_path)
    assert out.returncode == 7


def test_dry_run_prints_exact_command(tmp_path: Path) -> None:
    out = _dry_run(
        tmp_path, "--layout", "compact", "--ranks", "2", "--mpi", "openmpi4", "--", "./app", "x y"
    )
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert "export OMP_NUM_THREADS=1" in lines and "export OMP_PROC_BIND=close" in lines
    cmd = next(ln for ln in lines if ln.startswith("/usr/bin/mpirun"))
    assert cmd.startswith("/usr/bin/mpirun -np 2 --map-by ppr:2:l3cache:PE=1 --bind-to core ")
    # one PU per core, each rank's mask is its planned PU: no per-rank step, uniform places
    assert cmd.endswith("--bind-to core ./app 'x y'") and "export OMP_PLACES=threads" in lines


def test_verify_catches_a_wrong_binding() -> None:
    # The plan wants threads on CPUs 0 and 1; taskset forces both onto CPU 1.
    out = run(
        TOPOBIND,
        "verify",
        "--layout",
        "compact",
        "--threads",
        "2",
        "--",
        "env",
        "OMP_NUM_THREADS=2",
        "OMP_PROC_BIND=false",
        "taskset",
        "-c",
        "1",
    )
    assert out.returncode == 1
    assert "MISMATCH" in out.stdout and "1 of 2 threads bound to their planned CPU" in out.stdout


def verify_two_threads_json(*omp_env: str) -> subprocess.CompletedProcess[str]:
    """topobind verify (compact, 2 threads, JSON) of the probe run under ``env OMP_...``."""
    return run(
        TOPOBIND, "verify", "--layout", "compact", "--threads", "2", "-f", "json", "--",
        "env", "OMP_NUM_THREADS=2", *omp_env,
    )  # fmt: skip


def test_verify_passes_a_right_binding_and_json() -> None:
    out = verify_two_threads_json("OMP_PLACES={0},{1}", "OMP_PROC_BIND=close")
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["ok"] and [r["cpu"] for r in doc["rows"]] == [0, 1]


def test_bad_input(tmp_path: Path) -> None:
    out = run(RUN, "--launcher", "srun", "--", "true", cwd=tmp_path)
    assert out.returncode == 2 and "needs a Slurm allocation" in out.stderr
    out = run(RUN, "--ranks", "5", "--", "true", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    out = run(RUN, "--layout", "compact", cwd=tmp_path)
    assert out.returncode == 2 and "no program given" in out.stderr
    env = {**NO_SLURM, "TOPOBIND_KERNELS_DIR": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"}
    out = run_topobind("run", "--verify", "--", "true", env=env, cwd=tmp_path)
    assert out.returncode == 2 and "make kernels" in out.stderr


def test_env_launcher_is_evaluable() -> None:
    script = (
        f'eval "$({REPO}/launchers/topobind-env --layout compact --threads 2)"; '
        'echo "$OMP_NUM_THREADS $OMP_PLACES $OMP_PROC_BIND"'
    )
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert out.stdout.strip() == "2 {0},{1} close"


# --------------------------------------------------------------------------- bindings ignored
def test_verify_catches_an_ignored_binding() -> None:
    """OMP_PROC_BIND=false: threads float over both CPUs. Before, a thread that happened to
    sit on its planned CPU passed ("loosely bound"), so this passed 3 of 6 times; now every
    run fails and says why, whichever CPU the thread was on."""
    for _ in range(4):
        out = verify_two_threads_json("OMP_PROC_BIND=false")
        assert out.returncode == 1, out.stdout + out.stderr
        doc = json.loads(out.stdout)
        assert not doc["ok"]
        for row in doc["rows"]:
            assert row["status"] == "MISMATCH" and row["affinity"] == [0, 1]
            planned = row["planned"][0]
            want = (
                f"unbound: affinity 0-1, planned {planned}"
                if row["cpu"] == planned
                else f"ran on {row['cpu']}, planned {planned}; unbound: affinity 0-1"
            )
            assert row["reason"] == want


def test_verify_table_says_why_and_run_verify_refuses(tmp_path: Path) -> None:
    """The same ignored binding under `topobind run --verify`: a launcher (here a stand-in
    mpirun that starts the ranks itself and sets OMP_PROC_BIND=false) ignores the binding;
    run prints the table, does not launch the program, exits 1."""
    fake = tmp_path / "bin" / "mpirun"
    fake.parent.mkdir()
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import os, subprocess, sys\n"
        "a = sys.argv[1:]\n"
        "if a == ['--version']:\n"
        "    print('mpirun (Open MPI) 4.1.4')\n"
        "    sys.exit(0)\n"
        "n = int(a[a.index('-np') + 1])\n"
        "cmd = a[a.index('--bind-to') + 2 :]\n"
        "env = lambda r: {**os.environ, 'OMPI_COMM_WORLD_RANK': str(r),\n"
        "                 'OMPI_COMM_WORLD_LOCAL_RANK': str(r), 'OMP_PROC_BIND': 'false'}\n"
        "procs = [subprocess.Popen(cmd, env=env(r)) for r in range(n)]\n"
        "sys.exit(max(p.wait() for p in procs))\n"
    )
    fake.chmod(0o755)
    marker = tmp_path / "launched"
    env = {**NO_SLURM, "PATH": f"{fake.parent}:{NO_SLURM['PATH']}"}
    out = subprocess.run(
        [RUN, "--layout", "compact", "--ranks", "2", "--verify", "--", "touch", str(marker)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    rows = [ln for ln in out.stderr.splitlines() if re.match(r"\s+\d+\s+\d+\s", ln)]
    assert len(rows) == 2 and all("MISMATCH (" in r for r in rows), out.stderr
    assert all(("unbound: affinity 0-1, planned" in r) or ("ran on" in r) for r in rows)
    assert "0 of 2 threads bound to their planned CPU; 2 not" in out.stderr
    assert "verification failed, so the program is not launched" in out.stderr
    assert not marker.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bin"], "run left files behind"


# --------------------------------------------------------------------------- cannot run
@pytest.mark.parametrize(
    "argv,program,status,why",
    [
        (["run", "--layout", "compact", "-r", "1", "--"], "/nonexistent/prog", 127, "No such"),
        (["verify", "--layout", "compact", "--"], "nosuchlauncher", 127, "No such"),
        (["run", "-r", "1", "--"], "NOEXEC", 126, "Permission denied"),
        (["verify", "--"], "NOEXEC", 126, "Permission denied"),
    ],
)
def test_program_that_cannot_run_is_one_line(
    argv: list[str], program: str, status: int, why: str, tmp_path: Path
) -> None:
    if program == "NOEXEC":
        program = str(tmp_path / "data.txt")
        Path(program).write_text("not a program\n")
        Path(program).chmod(0o644)
    out = run(TOPOBIND, *argv, program, cwd=tmp_path)
    assert out.returncode == status
    want = f"topobind: error: cannot run {program}: " + (
        "No such file or directory" if status == 127 else "Permission denied"
    )
    assert out.stderr.splitlines() == [want] and why in want
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_missing_program_under_mpirun_exits_127(tmp_path: Path) -> None:
    out = run(RUN, "-r", "2", "--mpi", "openmpi4", "--", "/nonexistent/prog", cwd=tmp_path)
    assert out.returncode == 127
    assert "topobind: error: cannot run /nonexistent/prog: No such file or directory" in (
        out.stderr
    )
    assert "Traceback" not in out.stderr
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------- dry runs
def _dry_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return run_topobind(
        "run", "--dry-run", *args, env={**NO_SLURM, "TMPDIR": str(tmpdir)}, cwd=cwd, timeout=60
    )


def test_dry_run_writes_nothing_to_the_working_directory(tmp_path: Path) -> None:
    out = _dry_run(
        tmp_path, "--layout", "compact", "--ranks", "2", "--rank-step", "always", "--", "./app"
    )
    assert out.returncode == 0, out.stderr
    assert not list((tmp_path / "cwd").iterdir())
    # the command refers to the per-rank step's file; it lives in a fresh directory under $TMPDIR
    kept = [d for d in (tmp_path / "tmp").iterdir()]
    assert len(kept) == 1 and kept[0].name.startswith("topobind-dry-run-")
    assert f"# files this command reads (kept; remove when done): {kept[0]}" in out.stdout
    assert f"rankstep/bin/rankexec {kept[0]}/rankexec.txt -- ./app" in out.stdout
    text = (kept[0] / "rankexec.txt").read_text()
    assert text.splitlines()[0] == "topobind-rankexec 1" and "1\tOMP_NUM_THREADS=1\t" in text
    assert (kept[0] / "rankexec.txt").stat().st_mode & 0o777 == 0o600


def test_dry_run_without_launcher_or_failing_keeps_nothing(tmp_path: Path) -> None:
    out = _dry_run(tmp_path, "--layout", "compact", "--ranks", "1", "--", "./app")
    assert out.returncode == 0 and out.stdout.splitlines()[-1] == "./app"
    out = _dry_run(tmp_path, "--launcher", "srun", "--", "./app")
    assert out.returncode == 2 and "needs a Slurm allocation" in out.stderr
    assert not list((tmp_path / "cwd").iterdir())
    assert not list((tmp_path / "tmp").iterdir())


# --------------------------------------------------------------------------- warnings
UNEVEN_SMT = str(TOPOLOGIES / "16em64t-4s2c2t-offlines.xml")
SMT_WARNING = "topobind: warning: some cores have fewer usable PUs than others"


def test_run_and_env_print_the_plans_warnings(tmp_path: Path) -> None:
    out = run(RUN, "-t", UNEVEN_SMT, "--smt", "-r", "1", "-T", "2", "--", "true", cwd=tmp_path)
    assert out.returncode == 0 and out.stderr.startswith(SMT_WARNING), out.stderr
    out = run(TOPOBIND, "run", "--dry-run", "-t", UNEVEN_SMT, "--smt", "--", "./a", cwd=tmp_path)
    assert out.returncode == 0 and SMT_WARNING in out.stderr
    env = REPO / "launchers" / "topobind-env"
    script = f'eval "$({env} -t {UNEVEN_SMT} --smt)"; echo "[$OMP_NUM_THREADS $OMP_PLACES]"'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=NO_SLURM)
    assert out.stdout == "[7 {0},{4},{12},{1},{6},{3},{15}]\n"  # stdout stays eval-able
    assert out.stderr.startswith(SMT_WARNING)


def test_env_notes_whole_cores_on_smt_for_several_ranks() -> None:
    out = run(TOPOBIND, "env", "-t", "synthetic:pack:1 core:4 pu:2", "-r", "2")
    assert "export OMP_PLACES=cores" in out.stdout
    assert out.stderr.startswith("topobind: note: OMP_PLACES=cores: each thread gets the PUs")
    assert "the whole core (all its PUs) under mpirun --bind-to core" in out.stderr


def test_advice_on_idle_task_cpus_leads_to_a_plan() -> None:
    """Issue 31 item 9: every-other-core plans one thread on a 2-core SMT-1 node; Slurm's
    -c 2 is then half idle. --threads 2 does not plan there (the advice was that, and then
    "add --smt"): ask for -c 1 instead. Where --threads 2 plans, it is still the advice."""
    env = {**NO_SLURM, "SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "2"}
    for cores, advice in ((2, "--threads 2 does not fit this layout here: ask Slurm for -c 1"),
                          (8, "give --threads 2 or change -c")):  # fmt: skip
        topo = f"synthetic:package:1 l3cache:1 core:{cores} pu:1"
        out = run_topobind("env", "-t", topo, "-l", "every-other-core", "-r", "1", "-T", "1",
                           env=env)  # fmt: skip
        assert out.returncode == 0 and advice in out.stderr, out.stderr
        follow = ["-T", "2"] if "--threads 2" in advice and "give" in advice else []
        if follow:
            done = run_topobind("env", "-t", topo, "-l", "every-other-core", "-r", "1", *follow,
                                env=env)  # fmt: skip
            assert done.returncode == 0 and "warning" not in done.stderr, done.stderr


@pytest.mark.slow
def test_an_example_job_script_runs_from_a_job_directory(tmp_path: Path) -> None:
    """Issue 31 item 9: copied to a job directory and run there with topobind's environment
    on PATH (no TOPOBIND_ROOT), the script finds topobind-run and the probe; with no topobind
    at all, one line says what to do (it said 'topobind-run: command not found')."""
    script = tmp_path / "omp.sbatch"
    script.write_text((REPO / "docs" / "examples" / "openmp-only.sbatch").read_text())
    base = {k: v for k, v in NO_SLURM.items() if k not in ("PATH", "TOPOBIND_ROOT")}
    env = {**base, "PATH": f"{venv_bin('topobind').parent}:/usr/bin:/bin"}
    out = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "all 2 threads on their planned CPUs" in out.stderr
    if shutil.which("topobind-run", path="/usr/bin:/bin") or shutil.which(
        "topobind", path="/usr/bin:/bin"
    ):
        return  # installed system-wide: nothing to miss
    bare = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True,
                          env={**base, "PATH": "/usr/bin:/bin"}, timeout=60)  # fmt: skip
    assert bare.returncode == 127 and bare.stderr.startswith("topobind not found: "), bare


def test_verify_takes_srun_s_dash_n(tmp_path: Path) -> None:
    """Issue 31 item 9: -N is what srun users type for --nodes."""
    out = run_topobind("verify", "-l", "compact", "-r", "1", "-T", "1", "-N", "2", "--", "env",
                       env=NO_SLURM, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert "1      0  -          0                 -  -              MISSING" in out.stdout
    bad = run_topobind("verify", "-N", "0", "--", "env", env=NO_SLURM, cwd=tmp_path)
    assert bad.returncode == 2 and "argument --nodes/-N: '0'" in bad.stderr


def test_launcher_options_as_one_dash_word_and_unused_ones(tmp_path: Path) -> None:
    """Issue 31 item 4: --srun-args '--cpu-bind=none' (one word starting with a dash) was an
    argparse error; --launcher none --mpirun-args was ignored silently."""
    slurm = {**NO_SLURM, "SLURM_JOB_ID": "1", "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "1"}
    out = run_topobind("run", "-r", "2", "-T", "1", "--launcher", "srun", "--srun-args",
                       "--cpu-bind=none", "--dry-run", "--", "./app", "--srun-args", "-x",
                       env=slurm, cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("srun "))
    assert line.startswith("srun --cpu-bind=none ") and line.endswith(" ./app --srun-args -x")
    none = run_topobind("run", "-r", "1", "--launcher", "none", "--mpirun-args",
                        "--oversubscribe", "--", "true", env=NO_SLURM, cwd=tmp_path)  # fmt: skip
    assert none.returncode == 2 and none.stderr.count("\n") == 1, none.stderr
    assert none.stderr.startswith("topobind: error: --mpirun-args: --launcher none starts")
    other = run_topobind("run", "-r", "2", "-T", "1", "--launcher", "mpirun", "--srun-args",
                         "-N 1", "--dry-run", "--", "true", env=NO_SLURM, cwd=tmp_path)  # fmt: skip
    assert other.returncode == 0, other.stderr
    assert "topobind: note: --srun-args not used: the launch is openmpi" in other.stderr


def test_mpirun_rank_variables_win_over_the_batch_steps_slurm_ones() -> None:
    """An mpirun inside an sbatch script passes SLURM_PROCID=0/SLURM_LOCALID=0 of the batch
    step to every rank: OpenMPI's (and PMIx's) own variables must decide the rank."""
    from topobind.launch.mpi_launchers import local_rank

    batch = {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "2"}
    assert local_rank({**batch, "OMPI_COMM_WORLD_LOCAL_RANK": "1"}) == 1
    assert local_rank({**batch, "PMIX_LOCAL_RANK": "1"}) == 1
    assert local_rank({"SLURM_LOCALID": "3"}) == 3
    probe = subprocess.run(
        [str(REPO / "kernels" / "bin" / "whereami")],
        env={**os.environ, **batch, "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
             "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    doc = json.loads(probe.stdout)
    assert (doc["rank"], doc["ranks"]) == (1, 2)


@pytest.mark.parametrize(
    "value,expected",
    [("0", 0), ("007", 7), ("100000000", 100000000), ("100000001", 3), ("", 3), (" 1", 3),
     ("+1", 3), ("-1", 3), ("1x", 3), ("\u0661", 3), ("\u00b2", 3), ("\uff11", 3)],
)  # fmt: skip
def test_local_rank_reads_plain_ascii_digits_as_the_c_step_does(value: str, expected: int) -> None:
    """The rule of libtb/src/tb_env.c: ASCII digits 0..100000000, anything else skipped
    for the next variable (str.isdigit took the Arabic-Indic one as rank 1 and raised
    ValueError on a superscript two)."""
    from topobind.launch.mpi_launchers import local_rank

    assert local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": value, "SLURM_LOCALID": "3"}) == expected


# --------------------------------------------------------------------------- a new user's steps
def test_launchers_are_on_the_path_setup_prints(tmp_path: Path) -> None:
    """After `make setup`, the one PATH entry it prints finds topobind and both launchers,
    from any directory (no $TOPOBIND_ROOT)."""
    bindir = venv_bin("topobind-run").parent
    if not (bindir / "topobind-run").exists():
        pytest.skip("run 'make setup' (it links the launchers into .venv/bin)")
    env = {**NO_SLURM, "PATH": f"{bindir}:/usr/bin:/bin"}
    script = 'eval "$(topobind-env --layout compact --threads 2)"; echo "$OMP_PLACES"; ' + (
        "topobind-run --layout compact --ranks 1 -- true && echo ran"
    )
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert out.stdout.split() == ["{0},{1}", "ran"], out.stderr


def test_plan_openmpi_says_where_and_never_overwrites_a_rankfile(tmp_path: Path) -> None:
    args = [TOPOBIND, "plan", "-t", "synthetic:pack:2 l3:1 core:4 pu:2", "-l",
            "every-other-core", "-f", "openmpi"]  # fmt: skip
    first = run(*args, cwd=tmp_path)
    rankfile = tmp_path / "topobind.rankfile"
    assert first.returncode == 0 and f"topobind: wrote rankfile {rankfile}\n" in first.stderr
    rankfile.write_text("# mine\n")
    again = run(*args, cwd=tmp_path)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr == (
        "topobind: error: rankfile topobind.rankfile exists; give --force to replace it, or "
        "another --rankfile PATH\n"
    )
    assert rankfile.read_text() == "# mine\n"
    forced = run(*args, "--force", cwd=tmp_path)
    assert forced.returncode == 0 and rankfile.read_text().startswith("# topobind rankfile")


def test_a_run_outcome_decides_the_exit_status_the_command_prints() -> None:
    """Issue 28 item 4: the status of ``topobind run --verify-running`` is the engine's
    (launch/run.py ``Outcome.exit_status``), not the printer's: the program's own status
    first, else 1 when the sampled placement or the sampled memory differs from the plan."""
    from topobind.launch.run import Outcome
    from topobind.launch.verify import Row
    from topobind.launch.verify_memory import MemRow

    ok, wrong = Row(0, 0, (1,), None, "OK"), Row(0, 1, (2,), None, "MISMATCH", "cpu 3")
    good, bad = MemRow(0, "h", None), MemRow(0, "h", None, status="MISMATCH")
    job: Any = None  # not read by the decision
    assert Outcome(job, 0).exit_status == 0  # not sampled
    assert Outcome(job, 3, [wrong], []).exit_status == 3  # the program's status wins
    assert Outcome(job, 0, [ok], [], None).exit_status == 0  # no memory planned
    assert Outcome(job, 0, [ok], [], [good]).exit_status == 0
    assert Outcome(job, 0, [wrong], [], [good]).exit_status == 1
    assert Outcome(job, 0, [ok], [], [bad]).exit_status == 1
