"""Shared base of topobind's ReFrame checks (reframe_tests/*.py).

The checks run the prebuilt kernels of ``kernels/bin`` (found through
``$TOPOBIND_KERNELS_DIR``, else ``$TOPOBIND_ROOT/kernels/bin``, else relative to this file)
under ``topobind run``, which plans the layout *on the node the job runs on* and launches
it with the partition's launcher (srun masks, mpirun flags, or no launcher for one rank).
ReFrame's own launcher is replaced by the ``local`` one: topobind launches the ranks.

References come from the sites (``site_configs/<site>/site.yaml`` and its
``references.yaml``) through :func:`topobind.sites.reframe_references`, keyed
``'<site>'`` (a ReFrame scope holding all its partitions), so one check file serves every site.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from topobind import sites as tbsites
from topobind.errors import TopobindError

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probe.py"


def repo_root() -> Path:
    env = os.environ.get("TOPOBIND_ROOT")
    return Path(env) if env else HERE.parents[1]


def kernels_dir() -> Path:
    env = os.environ.get("TOPOBIND_KERNELS_DIR")
    return Path(env) if env else repo_root() / "kernels" / "bin"


def topobind_cmd() -> str:
    """The topobind command of the Python that runs ReFrame (the project's venv)."""
    exe = Path(sys.executable).parent / "topobind"
    if exe.exists():
        return shlex.quote(str(exe))
    return f"{shlex.quote(sys.executable)} -m topobind.cli"


def python_cmd() -> str:
    return shlex.quote(sys.executable)


def read_json(path: str | os.PathLike[str], what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise SanityError(f"{what}: {Path(path).name} was not written") from None
    except (OSError, ValueError) as exc:
        raise SanityError(f"{what}: cannot read {Path(path).name}: {exc}") from None


class TopobindCheck(rfm.RunOnlyRegressionTest):
    """Base of every topobind check: site lookup, references, kernels, launch."""

    valid_systems = ["*"]
    valid_prog_environs = ["builtin"]
    maintainers = ["topobind"]
    #: calibration mode: no references, and checks that need targets run anyway
    calibrating = variable(bool, value=False)

    #: key of topobind.sites.CHECKS (targets) or '' for sanity-only checks
    tb_family = ""

    def tb_variant(self) -> str:
        return ""

    # ------------------------------------------------------------------ hooks
    @run_after("init")
    def tb_set_references(self) -> None:
        if self.tb_family and not self.calibrating:
            try:
                self.reference = tbsites.reframe_references(self.tb_family, self.tb_variant())
            except TopobindError as exc:
                # A malformed site file must stop the run with its message, not be ignored.
                raise SanityError(str(exc)) from exc

    @run_after("setup")
    def tb_set_site(self) -> None:
        try:
            self.tb_site = tbsites.load_site(self.current_system.name)
        except TopobindError as exc:
            self.skip(
                f"system {self.current_system.name!r} is not a topobind site ({exc}); run with "
                "-C site_configs/reframe_config.py"
            )
        self.tb_partition = self.tb_site.partition(self.current_partition.name)
        self.num_tasks = 1
        if self.tb_partition.exclusive:
            self.exclusive_access = True
        self.env_vars["TOPOBIND_KERNELS_DIR"] = str(kernels_dir())
        self.env_vars["TOPOBIND_WORKDIR"] = "."  # topobind run's scratch files: the stage dir
        # The job holds the node with one task and topobind run starts every step itself: plan
        # each layout's own rank count, not the job's one task.
        self.env_vars["TOPOBIND_IGNORE_ALLOCATION_TASKS"] = "1"
        self.tb_check_setup()

    def tb_check_setup(self) -> None:
        """Per-check setup (executable, options); runs after the site is known."""

    @run_before("run")
    def tb_topobind_launches(self) -> None:
        # topobind run/verify/bench start the ranks with the plan's flags themselves.
        self.job.launcher = getlauncher("local")()

    # ------------------------------------------------------------------ helpers
    def tb_launcher_args(self) -> list[str]:
        """``topobind run`` launcher choice for this partition."""
        launcher = self.tb_partition.launcher
        return [] if launcher == "local" else ["--launcher", launcher]

    def tb_run(self, layout: str, ranks: int | None = None, threads: int | None = None) -> str:
        args = ["--layout", layout]
        if ranks:
            args += ["--ranks", str(ranks)]
        if threads:
            args += ["--threads", str(threads)]
        return " ".join(args)

    def tb_node(self) -> tbsites.ExpectedNode | None:
        """What the partition's node looks like: the site's expected node, else (for checks that
        run on this very machine) the live topology."""
        if self.tb_site.node is not None:
            return self.tb_site.node
        if self.tb_partition.scheduler == "local" or self.tb_site.name == "local":
            from topobind.topology import load

            return tbsites.ExpectedNode(**tbsites.node_counts(load("live")))
        return None

    def tb_exit_status(self) -> int | None:
        """Exit status of the main command, echoed by the post-run line."""
        path = Path(self.stagedir) / str(self.stdout)
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return None
        for line in reversed(text.splitlines()):
            if line.startswith("topobind-exit-status: "):
                return int(line.split(":", 1)[1])
        return None

    def tb_stderr_tail(self) -> str:
        path = Path(self.stagedir) / str(self.stderr)
        try:
            lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "(no stderr)"
        return lines[-1] if lines else "(stderr empty)"

    def tb_require_exit(self, ok: tuple[int, ...] = (0,)) -> int:
        status = self.tb_exit_status()
        if status is None:
            raise SanityError("the job did not finish (no exit status line in its output)")
        if status not in ok:
            raise SanityError(f"command exited with status {status}: {self.tb_stderr_tail()}")
        return status

    def tb_glob(self, pattern: str) -> list[str]:
        return sorted(glob.glob(os.path.join(self.stagedir, pattern)))

    def tb_hugepage_hint(self, kernel: str, got_kib: int | None, note: str) -> str:
        """Sanity message when a kernel did not get the 1 GiB pages the site enforces."""
        per_numa = max(self.tb_site.hugepages.pages_1g_per_numa, 1)
        node = self.tb_node()
        total = per_numa * (node.numa_nodes if node else 1)
        got = "no page size" if got_kib is None else f"{got_kib} KiB pages"
        return (
            f"{kernel}: the site requires 1 GiB pages for {kernel} but it got {got} "
            f"({note[:160]}); as root run: echo {total} > {tbsites.HUGEPAGES_1G_NR}"
        )


def status_line() -> list[str]:
    """Post-run command recording the main command's exit status in the job output."""
    return ['echo "topobind-exit-status: $?"']


def shell_join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def which(name: str) -> str | None:
    return shutil.which(name)
