"""Real Flux (flux-core 0.88.0, built by 'make flux' into build/flux/): topobind run inside a
Flux instance launches with flux run and verifies; several brokers on one host are refused in
one line; on the 3 local Slurm nodes, Flux started by srun runs one rank a node, verified on
all three. The launcher outside Flux is one line (in-process)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, TOPOBIND
from paths import REPO
from plans import plan_of
from slurm_helpers import SlurmCluster, slurm_cluster3  # noqa: F401  (session fixture)

from topobind.errors import TopobindError
from topobind.launch.resolve import choose
from topobind.topo.allocation import NONE, Allocation
from topobind.topo.topology import load

FLUX = REPO / "build" / "flux" / "bin" / "flux"
WHEREAMI = REPO / "kernels" / "bin" / "whereami"
needs_flux = pytest.mark.skipif(
    not FLUX.exists(), reason="Flux is not built: 'make flux' (the mirror's flux/ archive)"
)
#: seconds a Flux instance with one short job may take on a busy 2-core machine
HANG = 240
#: the job shells load this clone's plugin folder, not the shared Flux prefix's (make flux)
PLUGINS = f"-Sconf.shell_pluginpath={REPO / 'build' / 'flux-plugins'}"


def in_flux(
    script: str, tmp_path: Path, size: int = 1, timeout: float = HANG
) -> subprocess.CompletedProcess[str]:
    """``flux start --test-size=SIZE bash -c SCRIPT`` in ``tmp_path``, topobind on PATH."""
    env = {**NO_SLURM, "PATH": f"{Path(TOPOBIND).parent}:{NO_SLURM.get('PATH', '')}"}
    return subprocess.run(
        [str(FLUX), "start", f"--test-size={size}", PLUGINS, "bash", "-c", script],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=timeout,
    )  # fmt: skip


def test_the_flux_launcher_outside_flux_is_one_line() -> None:
    plan = plan_of(load("synthetic:core:2 pu:1"), "compact", ranks=2)
    with pytest.raises(TopobindError, match=r"--launcher flux needs a Flux instance") as info:
        choose(plan, "flux", allocation=NONE)
    assert "\n" not in str(info.value)
    assert choose(plan, None, allocation=Allocation("flux", 1)).name == "flux"  # the default


@pytest.mark.slow
@needs_flux
@pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first")
def test_run_in_a_flux_instance_launches_with_flux_run_and_verifies(tmp_path: Path) -> None:
    """Issue 40's 'done when': in flux start --test-size=1, topobind run --verify says it
    launched with flux run and passes; each rank ran on its own planned CPU."""
    done = in_flux(
        f"topobind run --layout compact --ranks 2 --threads 1 --verify -- {WHEREAMI}", tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "topobind: note: launching with flux run on 1 node(s)" in done.stderr
    assert "topobind: verify: all 2 threads on their planned CPUs, bound to them" in done.stderr
    assert '"affinity":[0]' in done.stdout and '"affinity":[1]' in done.stdout


@pytest.mark.slow
@needs_flux
@pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first")
def test_a_flux_job_of_one_core_plans_that_core(tmp_path: Path) -> None:
    """Flux does not confine a job to its cores: in 'flux alloc -n1 -c1' topobind plans the
    one core R gives the job (compact's default: a thread per core), not the whole node."""
    done = in_flux(f"flux alloc -n1 -c1 topobind run -l compact --verify -- {WHEREAMI}", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "topobind: verify: all 1 threads on their planned CPUs" in done.stderr, done.stderr
    assert done.stdout.count('"thread":') == 1, done.stdout


@pytest.mark.slow
@needs_flux
@pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first")
def test_verify_running_samples_the_program_under_flux_run(tmp_path: Path) -> None:
    """--verify-running: each task's step samples where its threads run, under flux run."""
    done = in_flux(
        f"topobind run -l compact -r 2 --threads 1 --verify-running -- {WHEREAMI} --spin-ms 1500",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "verify: the program's 2 threads ran on their planned CPUs" in done.stderr


def test_without_the_archive_make_flux_says_where_to_get_it(tmp_path: Path) -> None:
    """No mirror's flux/: one line naming the archive and where to get it, exit 0; where the
    mirror is required (CI's TOPOBIND_REQUIRE_MIRROR=1), exit 1 with that line on stderr."""
    env = {k: v for k, v in NO_SLURM.items() if k != "TOPOBIND_REQUIRE_MIRROR"}
    env.update(TOPOBIND_OFFLINE_MIRROR=str(tmp_path), TOPOBIND_CACHE=str(tmp_path))
    argv = ["bash", str(REPO / "scripts" / "build-flux.sh")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stdout + done.stderr
    assert done.stdout.startswith("flux: skipped: ") and "flux-core-0.88.0" in done.stdout
    env["TOPOBIND_REQUIRE_MIRROR"] = "1"
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("flux: error: "), done.stderr


@pytest.mark.slow
@needs_flux
def test_several_brokers_on_one_host_are_refused_in_one_line(tmp_path: Path) -> None:
    done = in_flux("topobind run -l compact -r 1 -- true", tmp_path, size=3)
    assert done.returncode == 2
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("topobind: error:")]
    assert len(errors) == 1 and "several brokers on one host" in errors[0], done.stderr


@pytest.mark.slow
@needs_flux
@pytest.mark.skipif(not WHEREAMI.exists(), reason="run 'make kernels' first")
def test_flux_started_by_srun_on_three_nodes_verifies_on_each(
    slurm_cluster3: SlurmCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """One broker a node (srun --mpi=pmi2 flux start); topobind run --ranks 1: one rank a
    node, and the verification names all three nodes."""
    cluster = slurm_cluster3
    script = tmp_path / "in-flux.sh"
    script.write_text(
        f"#!/bin/bash\nexport PATH={Path(TOPOBIND).parent}:$PATH\ncd {tmp_path}\n"
        f"topobind run --ranks 1 --threads 1 --verify -- {WHEREAMI} >/dev/null\n"
    )
    script.chmod(0o755)
    done = cluster.run(
        ["srun", "-N3", "-n3", "--mpi=pmi2", str(FLUX), "start", PLUGINS, str(script)],
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr
    assert "on 3 nodes: node[1-3]" in done.stderr, done.stderr


@pytest.mark.slow
@needs_flux
@pytest.mark.parametrize("probe", ["whereami-mpi-mpich", "whereami-mpi"])  # MPICH, OpenMPI 4
def test_an_mpi_program_under_flux_run_starts_mpi_and_verifies(tmp_path: Path, probe: str) -> None:
    """Flux's PMI starts MPICH and OpenMPI 4 programs: one MPI world of 2 ranks, each on
    its planned CPU (the MPI probe of the program's MPI is the verification's probe)."""
    program = REPO / "kernels" / "bin" / probe
    if not program.exists():
        pytest.skip(f"{probe} is not built: make whereami-mpis")
    done = in_flux(f"topobind run -l compact -r 2 --threads 1 --verify -- {program}", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "topobind: verify: all 2 threads on their planned CPUs" in done.stderr, done.stderr
    assert '"ranks":2,"rank":0' in done.stdout and '"mpi":true' in done.stdout, done.stdout


def test_a_task_of_a_flux_job_launches_as_outside_and_refuses_flux_run() -> None:
    """From a task of a Flux job (FLUX_JOB_ID), flux run would queue behind the job's own
    cores: the default launcher is the one outside any manager, --launcher flux one line."""
    plan = plan_of(load("synthetic:core:2 pu:1"), "compact", ranks=2)
    task = Allocation("flux", 1, in_job="f2Kx")
    assert choose(plan, None, allocation=task).name != "flux"
    with pytest.raises(TopobindError, match=r"task of flux job f2Kx, whose flux run would wait"):
        choose(plan, "flux", allocation=task)


@pytest.mark.slow
@needs_flux
def test_validate_runs_the_checks_as_flux_jobs_on_the_three_broker_instance(
    tmp_path: Path,
) -> None:
    """The local site's 'flux' partition (ReFrame's flux scheduler, the flux Python bindings
    on PYTHONPATH) on flux start --test-size=3: BindingCheck's six layouts run as Flux jobs,
    each holding a whole node (tb_flux_whole_node), and pass."""
    pytest.importorskip("cffi", reason="the flux bindings need cffi and ply: make setup")
    bindings = REPO / "build" / "flux" / "lib" / "python3.11" / "site-packages"
    done = in_flux(
        f"PYTHONPATH={bindings} topobind validate --site local --partition flux "
        f"-n BindingCheck --results {tmp_path / 'rfm'}",
        tmp_path,
        size=3,
        timeout=HANG * 2,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed, 0 failed" in done.stdout, done.stdout


@pytest.mark.slow
@needs_flux
def test_a_gpu_node_through_flux_run_gets_and_verifies_its_device_variables(
    tmp_path: Path,
) -> None:
    """A node of the test GPU topologies (this machine with an NVIDIA GPU below each of its
    first two cores) planned per-gpu and launched by flux run: each rank's stand-in CUDA
    driver (tests/launch/fake_libcuda.c) sees its planned GPU."""
    from test_gpu_launch import FAKE_GPUS, fake_libcuda, nvidia_xml

    lib = fake_libcuda(tmp_path)
    xml = nvidia_xml(tmp_path / "node.xml")
    done = in_flux(
        f"export LD_LIBRARY_PATH={lib} TB_FAKE_CUDA_GPUS='{FAKE_GPUS}'; "
        f"topobind run -t {xml} -l per-gpu --verify -- true",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "launching with flux run" in done.stderr
    assert "4 of 4 device variables as planned" in done.stderr, done.stderr
    assert "GPU runtime: 2 of 2 ranks saw their planned GPUs" in done.stderr, done.stderr


@pytest.mark.slow
@needs_flux
def test_an_openmpi5_program_under_flux_run_gets_a_note(tmp_path: Path) -> None:
    """OpenMPI 5 starts under flux run only through flux-pmix (not in flux-core): the note
    says so and names the launcher that starts it."""
    program = REPO / "kernels" / "bin" / "whereami-mpi-openmpi5"
    if not program.exists():
        pytest.skip("whereami-mpi-openmpi5 is not built: make whereami-mpis")
    done = in_flux(f"topobind run -l compact -r 2 --threads 1 --dry-run -- {program}", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "links OpenMPI 5, which starts under flux run only with Flux's PMIx plugin" in (
        done.stderr
    )
