"""The Flux shell plugin (rankstep/topobind_flux.c, built by 'make flux'): flux run -o
topobind=LAYOUT places each task, read back from /proc; bad option values end the job with
one line in its exception, never a crashed shell. Real Flux (flux start --test-size=1), the
plugin loaded from a folder of its own (-Sconf.shell_pluginpath: the shell loads every *.so
there)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, TOPOBIND
from paths import REPO

FLUX = REPO / "build" / "flux" / "bin" / "flux"
PLUGIN = REPO / "rankstep" / "bin" / "topobind_flux.so"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (FLUX.exists() and PLUGIN.exists()),
        reason="Flux or its plugin is not built: 'make flux' (the mirror's flux/ archive)",
    ),
]
HANG = 240
MARK = "=== "


def flux_jobs(tmp_path: Path, *commands: str) -> dict[str, tuple[int, str]]:
    """Run each ``flux run ...`` command in one Flux instance with the plugin: {command:
    (exit status, its stdout and stderr)}."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copy(PLUGIN, plugins / "topobind.so")
    script = "".join(f"echo '{MARK}{c}'\n{c} 2>&1\necho \"{MARK}rc=$?\"\n" for c in commands)
    env = {**NO_SLURM, "PATH": f"{Path(TOPOBIND).parent}:{NO_SLURM.get('PATH', '')}"}
    done = subprocess.run(
        [str(FLUX), "start", "--test-size=1", f"-Sconf.shell_pluginpath={plugins}",
         "bash", "-c", script],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=HANG,
    )  # fmt: skip
    out: dict[str, tuple[int, str]] = {}
    last = ""
    for chunk in done.stdout.split(MARK)[1:]:
        head, _, body = chunk.partition("\n")
        if head.startswith("rc="):
            out[last] = (int(head[3:]), out[last][1])
        else:
            last = head
            out[last] = (-1, body)
    assert len(out) == len(commands), done.stdout + done.stderr
    return out


def test_spread_puts_two_tasks_on_one_cpu_each_apart(tmp_path: Path) -> None:
    status_line = "$(grep Cpus_allowed_list /proc/self/status)"
    show = f"sh -c 'echo $FLUX_TASK_LOCAL_ID {status_line} $OMP_PLACES $TOPOBIND_FLUX_US'"
    jobs = flux_jobs(tmp_path, f"flux run -n2 -o topobind=spread {show}")
    status, text = next(iter(jobs.values()))
    assert status == 0, text
    lines = sorted(ln.split() for ln in text.splitlines() if ln[:1].isdigit())
    assert [ln[0] for ln in lines] == ["0", "1"], text
    cpus = [ln[2] for ln in lines]  # 'Cpus_allowed_list:' then the list
    assert all(re.fullmatch(r"[0-9]+", c) for c in cpus) and len(set(cpus)) == 2, text
    assert [ln[3] for ln in lines] == [f"{{{c}}}" for c in cpus]  # exact OMP_PLACES
    assert all(int(ln[4]) > 0 and int(ln[5]) >= 0 for ln in lines)  # planning, task (us)


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("-o topobind=", "-o topobind=: give LAYOUT"),
        ("-o topobind=nosuch", "unknown layout 'nosuch'"),
        ("-o 'topobind=spread;rm -rf /tmp/x'", "give LAYOUT[,NAME=VALUE...]"),
        ("-o 'topobind=spread,threads=$(id)'", "is not NAME or NAME=VALUE"),
        ("-o topobind", "needs LAYOUT[,NAME=VALUE...] as a string"),
        ("-o topobind=spread,ranks=9", "is set by the plugin"),
        ("-o topobind=compact,threads=4096", "--threads 4096 is more than"),  # fewer cores
        # a newline in the value: shown as '?', the reason stays on the exception's line
        ("-o topobind=$'sp\\nread'", "-o topobind=sp?read: give LAYOUT"),
    ],
)
def test_a_bad_option_is_one_line_in_the_jobs_exception(
    tmp_path: Path, option: str, says: str
) -> None:
    jobs = flux_jobs(tmp_path, f"flux run -n1 {option} echo never-ran")
    status, text = next(iter(jobs.values()))
    assert status != 0 and "never-ran" not in text, text
    exceptions = [ln for ln in text.splitlines() if "job.exception" in ln]
    assert len(exceptions) == 1 and "type=topobind" in exceptions[0], text
    assert says in exceptions[0], text
    assert not re.search(r"Segmentation|core dumped|Aborted|signal", text), text


def test_a_gpu_node_from_the_sites_initrc_gives_each_task_its_gpu(tmp_path: Path) -> None:
    """A site's initrc loads the plugin with a topology (conf topology=SRC, as the SPANK
    plugin's topology=): a node of the test GPU topologies (this machine, an NVIDIA GPU below
    each of its first two cores), per-gpu: each task bound beside its own GPU, device order
    pinned."""
    from test_gpu_launch import nvidia_xml

    xml = nvidia_xml(tmp_path / "node.xml")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    shutil.copy(PLUGIN, plugins / "topobind.so")
    initrc = tmp_path / "initrc.lua"
    initrc.write_text(f'plugin.load {{ file = "topobind.so", conf = {{ topology = "{xml}" }} }}\n')
    cpus = "$(grep Cpus_allowed_list /proc/self/status)"
    show = f"echo $FLUX_TASK_LOCAL_ID {cpus} $CUDA_DEVICE_ORDER $CUDA_VISIBLE_DEVICES"
    env = {**NO_SLURM, "PATH": f"{Path(TOPOBIND).parent}:{NO_SLURM.get('PATH', '')}"}
    done = subprocess.run(
        [str(FLUX), "start", "--test-size=1", f"-Sconf.shell_pluginpath={plugins}", "flux",
         "run", "-n2", "-o", f"initrc={initrc}", "-o", "topobind=per-gpu", "sh", "-c", show],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=HANG,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = sorted(ln.split() for ln in done.stdout.splitlines())
    assert [(ln[0], ln[3], ln[4]) for ln in lines] == [
        ("0", "PCI_BUS_ID", "0"),
        ("1", "PCI_BUS_ID", "1"),
    ], done.stdout
    assert len({ln[2] for ln in lines}) == 2, done.stdout  # each beside its own GPU, apart


def test_topobind_verify_checks_the_plugins_placement_against_the_plan(tmp_path: Path) -> None:
    """topobind verify -- flux run -o topobind=spread: the probe under the plugin matches the
    plan topobind makes for the same request."""
    jobs = flux_jobs(
        tmp_path, "topobind verify -l spread -r 2 --threads 1 -- flux run -n2 -o topobind=spread"
    )
    status, text = next(iter(jobs.values()))
    assert status == 0, text
    assert "2 of 2 threads bound to their planned CPU" in text, text
