"""The project's real one-node Slurm cluster on localhost (``scripts/local-slurm``) for tests.

Running Slurm jobs needs root (munged, slurmctld and slurmd run as root here) and Debian's
``slurm-wlm``/``munge``; without them the fixture skips the test with the reason.

Use it from any test file with the session-scoped fixture ``slurm_cluster``: import it into
the test module (pytest finds fixtures imported into a module) and ask for it by name::

    from slurm_helpers import sbatch_wait, slurm_cluster  # noqa: F401  (fixture)

    def test_two_ranks(slurm_cluster, tmp_path):
        script = tmp_path / "job.sbatch"
        script.write_text("#!/bin/bash\\n#SBATCH -n 2\\nsrun --cpu-bind=map_cpu:1,0 hostname\\n")
        job = sbatch_wait(script, "--time=1", cluster=slurm_cluster, workdir=tmp_path)
        assert job.ok, job.describe()
        # job.job_id, job.state ("COMPLETED"), job.exit_code, job.signal, job.output (text)

        # Slurm commands run with cluster.env (it carries SLURM_CONF):
        out = slurm_cluster.run(["srun", "-n", "2", "true"])
        assert out.returncode == 0, out.stderr

The fixture starts the cluster when it is not running and stops it at the end of the test
session only if it started it (a cluster you started by hand with ``make slurm-start`` is
left running). Outside pytest, call ``ensure_local_slurm()`` (raises ``SlurmUnavailable``
with the reason when it cannot run) and ``release(cluster)`` when done.

The cluster's state directory is ``$TOPOBIND_SLURM_DIR`` or ``<repo>/build/local-slurm``;
every helper also takes ``state_dir=`` to use another one (a second, independent cluster on
its own ports, as ``tests/launch/test_local_slurm.py`` does for its start/stop tests).

``sbatch_wait(script, *sbatch_args)`` submits with ``sbatch --parsable`` and polls the job
every 0.2 s until it ends (``sbatch --wait`` polls at 2 s and then 8 s intervals, which makes
a 3 s job take 10 s); ``use_wait=True`` runs the real ``sbatch --wait`` instead. The job's
output file is the one Slurm reports (``StdOut`` of ``scontrol show job``), so ``#SBATCH -o``
in the script is honoured; without one, ``-o <workdir>/slurm-%j.out`` is added.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from paths import REPO

SCRIPT = REPO / "scripts" / "local-slurm"

# Job states after which nothing more happens (base states of squeue/scontrol).
FINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)


class SlurmUnavailable(Exception):
    """The local cluster cannot run here (not root, Slurm not installed, start failed)."""


def state_dir_of(state_dir: Path | str | None = None) -> Path:
    if state_dir is not None:
        return Path(state_dir).resolve()
    env = os.environ.get("TOPOBIND_SLURM_DIR")
    return Path(env).resolve() if env else REPO / "build" / "local-slurm"


def _script_env(state_dir: Path | str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["TOPOBIND_SLURM_DIR"] = str(state_dir_of(state_dir))
    return env


def run_script(
    command: str,
    state_dir: Path | str | None = None,
    timeout: float = 180,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``scripts/local-slurm COMMAND ARGS`` for that state directory (output captured);
    ``env`` adds variables (e.g. TOPOBIND_SLURMD_TIMEOUT) to the script's environment."""
    return subprocess.run(
        [str(SCRIPT), command, *args],
        capture_output=True,
        text=True,
        env={**_script_env(state_dir), **(env or {})},
        timeout=timeout,
    )


def slurm_env(state_dir: Path | str | None = None) -> dict[str, str]:
    """os.environ without any outer SLURM_* variable, plus SLURM_CONF of the local cluster."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["SLURM_CONF"] = str(state_dir_of(state_dir) / "slurm.conf")
    return env


def is_running(state_dir: Path | str | None = None) -> bool:
    return run_script("status", state_dir, timeout=60).returncode == 0


def start(
    state_dir: Path | str | None = None, nodes: int = 1, env: Mapping[str, str] | None = None
) -> str:
    """Start the cluster with NODES nodes (a no-op when running); returns the output."""
    out = run_script("start", state_dir, args=["--nodes", str(nodes)], env=env)
    if out.returncode != 0:
        raise SlurmUnavailable(
            f"scripts/local-slurm start failed (exit {out.returncode}):\n{out.stdout}{out.stderr}"
        )
    return out.stdout


def stop(state_dir: Path | str | None = None) -> str:
    out = run_script("stop", state_dir, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"scripts/local-slurm stop failed:\n{out.stdout}{out.stderr}")
    return out.stdout


def why_unavailable() -> str | None:
    """The reason the local cluster cannot run here, or None."""
    if os.geteuid() != 0:
        return "the local Slurm cluster needs root (munged, slurmctld, slurmd run as root)"
    missing = [t for t in ("slurmctld", "slurmd", "sbatch", "munged") if not shutil.which(t)]
    if missing:
        return f"Slurm/munge not installed ({', '.join(missing)} missing): run 'make setup'"
    return None


@dataclass(frozen=True)
class SlurmCluster:
    state_dir: Path
    conf: Path
    node: str  # the first node's name (node1)
    env: dict[str, str]  # environment for Slurm commands: SLURM_CONF set, no outer SLURM_*
    started_here: bool  # True when ensure_local_slurm() started it (release() stops it)
    nodes: tuple[str, ...] = ()  # every node: node1, node2, ...

    def run(
        self, args: Sequence[str], timeout: float = 120, **kwargs: object
    ) -> subprocess.CompletedProcess[str]:
        """Run a command (srun, sinfo, ...) against this cluster; output captured as text."""
        return subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            **kwargs,  # type: ignore[call-overload]
        )


_started_here: set[Path] = set()


def conf_nodes(conf: Path) -> tuple[str, ...]:
    """The node names of a slurm.conf (its NodeName= lines)."""
    return tuple(re.findall(r"^NodeName=(\S+)", conf.read_text(), re.M))


def ensure_local_slurm(
    state_dir: Path | str | None = None, nodes: int = 1, env: Mapping[str, str] | None = None
) -> SlurmCluster:
    """Start the local cluster (NODES nodes) if it is not running and return how to use it.

    A cluster already running in that state directory with another node count is an error
    (SlurmUnavailable): stop it first."""
    reason = why_unavailable()
    if reason:
        raise SlurmUnavailable(reason)
    d = state_dir_of(state_dir)
    started = False
    if not is_running(d):
        start(d, nodes, env)
        started = True
        _started_here.add(d)
    have = conf_nodes(d / "slurm.conf")
    if len(have) != nodes:
        raise SlurmUnavailable(
            f"the cluster of {d} runs {len(have)} node(s), not {nodes}: "
            f"TOPOBIND_SLURM_DIR={d} scripts/local-slurm stop"
        )
    return SlurmCluster(
        d, d / "slurm.conf", have[0], slurm_env(d), started or d in _started_here, have
    )


def release(cluster: SlurmCluster) -> None:
    """Stop the cluster if ensure_local_slurm() started it."""
    if cluster.state_dir in _started_here:
        _started_here.discard(cluster.state_dir)
        stop(cluster.state_dir)


@atexit.register
def _stop_leftovers() -> None:  # a cluster started here and never released
    for d in list(_started_here):
        _started_here.discard(d)
        run_script("stop", d, timeout=120)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """The local one-node Slurm cluster, started for the session if needed (root only)."""
    try:
        cluster = ensure_local_slurm()
    except SlurmUnavailable as e:
        pytest.skip(str(e))
    yield cluster
    release(cluster)


#: SlurmdTimeout of the multi-node cluster: a killed node is DOWN (its jobs NODE_FAIL) within
#: about three times this (slurmctld pings every third of it), not the default 60 s.
MULTI_SLURMD_TIMEOUT = 10


def multi_node_dir() -> Path:
    """State directory of the 3-node cluster: beside the one-node cluster's, its own ports,
    bridge and subnet (both may run at once)."""
    d = state_dir_of()
    return d.with_name(d.name + "-3nodes")


@pytest.fixture(scope="session")
def slurm_cluster3() -> Iterator[SlurmCluster]:
    """A local cluster of 3 nodes (node1..node3, each slurmd in its own namespaces), started
    for the session if needed and stopped at its end if started here (root only)."""
    try:
        cluster = ensure_local_slurm(
            multi_node_dir(), nodes=3, env={"TOPOBIND_SLURMD_TIMEOUT": str(MULTI_SLURMD_TIMEOUT)}
        )
    except SlurmUnavailable as e:
        pytest.skip(str(e))
    yield cluster
    release(cluster)


def node_states(cluster: SlurmCluster) -> dict[str, str]:
    """{node: state} from sinfo (idle, down*, ...)."""
    out = cluster.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=30)
    return dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)


def revive_nodes(cluster: SlurmCluster, timeout: float = 60) -> None:
    """Restart the slurmd of killed nodes ('start' on a running cluster) and wait until every
    node is idle again."""
    out = run_script("start", cluster.state_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    deadline = time.monotonic() + timeout
    while set(node_states(cluster).values()) != {"idle"}:
        if time.monotonic() > deadline:
            raise TimeoutError(f"nodes not idle after revival: {node_states(cluster)}")
        time.sleep(0.5)


@dataclass(frozen=True)
class CompletedJob:
    job_id: int
    state: str  # final base state: COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    exit_code: int  # the batch script's exit code (ExitCode=<code>:<signal>)
    signal: int  # the signal that ended it, 0 if none
    output: str  # text of the job's output file ("" if it was not written)
    output_path: Path | None
    submit_stdout: str  # what sbatch printed

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == 0

    @property
    def returncode(self) -> int:
        """Like a process's exit status (sbatch --wait's): 0 only for a completed job."""
        if self.exit_code:
            return self.exit_code
        if self.signal:
            return 128 + self.signal
        return 0 if self.state == "COMPLETED" else 1

    def describe(self) -> str:
        return (
            f"job {self.job_id}: {self.state}, exit code {self.exit_code}, signal {self.signal}"
            f"\n--- output ({self.output_path}) ---\n{self.output}"
        )


def job_info(job_id: int, env: Mapping[str, str]) -> dict[str, str]:
    """``scontrol -o show job ID`` as a dict ({} when Slurm no longer knows the job)."""
    out = subprocess.run(
        ["scontrol", "-o", "show", "job", str(job_id)],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=30,
    )
    if out.returncode != 0:
        return {}
    info: dict[str, str] = {}
    # KEY=VALUE separated by spaces (a path with a space in it is cut at the space)
    for m in re.finditer(r"(?:^|\s)([\w:/]+)=(\S*)", out.stdout):
        info.setdefault(m.group(1), m.group(2))
    return info


def _has_output_option(args: Sequence[str]) -> bool:
    return any(a in ("-o", "--output") or a.startswith(("-o", "--output=")) for a in args)


def _script_has_output(script: Path) -> bool:
    try:
        text = script.read_text(errors="replace")
    except OSError:
        return False
    return re.search(r"^#SBATCH\s+(-o\b|--output\b)", text, re.M) is not None


def sbatch_wait(
    script_path: Path | str,
    *args: str | os.PathLike[str] | Mapping[str, str],
    cluster: SlurmCluster | None = None,
    env: Mapping[str, str] | None = None,
    workdir: Path | str | None = None,
    timeout: float = 300,
    use_wait: bool = False,
) -> CompletedJob:
    """Submit SCRIPT_PATH with sbatch (extra sbatch ARGS before it) and wait for the job.

    env: environment for sbatch (default: cluster.env, else slurm_env()); the job gets it
    (--export=ALL). workdir: the job's working directory (-D; default: a new temporary
    directory; sbatch runs there, so it is also SLURM_SUBMIT_DIR). On timeout the job is
    cancelled and TimeoutError raised.

    The older form ``sbatch_wait(script, workdir, env, *args)`` is accepted too.
    """
    sargs: list[str]
    if len(args) >= 2 and isinstance(args[0], os.PathLike) and isinstance(args[1], Mapping):
        workdir, env = Path(args[0]), args[1]  # older call form
        sargs = [str(a) for a in args[2:] if not isinstance(a, Mapping)]
    else:
        if any(isinstance(a, Mapping) for a in args):
            raise TypeError("sbatch_wait: pass env= as a keyword")
        sargs = [os.fspath(a) for a in args]  # type: ignore[arg-type]
    if env is None:
        env = cluster.env if cluster is not None else slurm_env()
    wd = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="sbatch-"))
    script = Path(script_path)
    cmd = ["sbatch", "--parsable", "-D", str(wd), "--export=ALL"]
    if not _has_output_option(sargs) and not _script_has_output(script):
        cmd += ["-o", str(wd / "slurm-%j.out")]
    if use_wait:
        cmd.append("--wait")
    cmd += [*sargs, str(script)]
    # submitted from the working directory, as users do: SLURM_SUBMIT_DIR is WORKDIR too
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=dict(env), timeout=timeout, cwd=wd
    )
    m = re.match(r"\s*(\d+)", proc.stdout)
    if not m:
        raise RuntimeError(
            f"sbatch did not submit (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"{proc.stdout}{proc.stderr}"
        )
    return wait_job(int(m.group(1)), env, wd, timeout, proc.stdout)


def wait_job(
    job_id: int,
    env: Mapping[str, str],
    workdir: Path,
    timeout: float = 300,
    submit_stdout: str = "",
) -> CompletedJob:
    """Poll job JOB_ID every 0.2 s until it ends; its output file is read (relative to
    WORKDIR). On timeout the job is cancelled and TimeoutError raised."""
    wd = workdir
    deadline = time.monotonic() + timeout
    info: dict[str, str] = {}
    while True:
        info = job_info(job_id, env)
        if info.get("JobState") in FINAL_STATES:
            break
        if not info:
            raise RuntimeError(f"job {job_id} is unknown to Slurm (slurmctld restarted?)")
        if time.monotonic() > deadline:
            subprocess.run(["scancel", str(job_id)], env=dict(env), capture_output=True)
            raise TimeoutError(f"job {job_id} did not finish within {timeout} s: {info}")
        time.sleep(0.2)
    code, _, sig = info.get("ExitCode", "0:0").partition(":")
    out_path: Path | None = None
    stdout = info.get("StdOut", "")
    if stdout:
        out_path = Path(stdout)
        if not out_path.is_absolute():
            out_path = wd / out_path
    output = ""
    if out_path is not None:
        for _ in range(25):  # the file is complete when the job ends; NFS-like lag is not expected
            if out_path.exists():
                break
            time.sleep(0.2)
        if out_path.exists():
            output = out_path.read_text(errors="replace")
    return CompletedJob(
        job_id=job_id,
        state=info["JobState"],
        exit_code=int(code or 0),
        signal=int(sig or 0),
        output=output,
        output_path=out_path,
        submit_stdout=submit_stdout,
    )


#: the site the stand-in Slurm tests validate (the partition's nodes come from sinfo)
STAND_IN_SITE_YAML = (
    "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
    "partitions:\n  - {name: slurm, scheduler: slurm, launcher: srun, access: ['-p debug']}\n"
    "hugepages: {pages_1g_per_numa: 0}\n"
)


def stand_in_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: Sequence[str], scontrol_tail: str = ""
) -> Path:
    """No cluster: ``sinfo`` lists ``nodes`` idle, ``scontrol`` logs every call to the file
    returned (and runs ``scontrol_tail``, shell lines, after), site ``fleet`` in
    TOPOBIND_SITES_DIR; both on PATH for the rest of the test."""
    import stat

    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "scontrol.log"
    (bindir / "sinfo").write_text(
        "#!/bin/sh\nfor n in " + " ".join(nodes) + '; do echo "$n idle"; done\n'
    )
    (bindir / "scontrol").write_text(f'#!/bin/sh\necho "$*" >> {log}\n{scontrol_tail}')
    for f in bindir.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    sites = tmp_path / "sites" / "fleet"
    sites.mkdir(parents=True)
    (sites / "site.yaml").write_text(STAND_IN_SITE_YAML)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(sites.parent))
    return log
