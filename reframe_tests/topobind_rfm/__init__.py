"""Shared base of topobind's ReFrame checks (reframe_tests/*.py).

The checks run the prebuilt kernels of ``kernels/bin`` (found through
``$TOPOBIND_KERNELS_DIR``, else ``$TOPOBIND_ROOT/kernels/bin``, else relative to this file)
under ``topobind run``, which plans the layout *on the node the job runs on* and launches
it with the partition's launcher (srun masks, mpirun flags, or no launcher for one rank).
ReFrame's own launcher is replaced by the ``local`` one: topobind launches the ranks.

The site whose targets apply is ``$TOPOBIND_SITE`` (any ReFrame configuration, e.g. a
cluster's own), else the ReFrame system of the same name (``site_configs/reframe_config.py``
names its systems after the sites). Without either the run stops at loading with one message:
a run that tests nothing must not pass. References come from that site
(``site_configs/<site>/site.yaml`` and its ``references.yaml``), keyed ``'*'`` (every system
and partition of the run).

Under a configuration that is not derived from the site files, a partition's scheduler and
launcher come from ReFrame's partition, and the checks run once per partition, in the first
of its environments that compiles and links a C program with OpenMP (the others SKIP).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import reframe as rfm
import reframe.core.runtime as rt
from reframe.core.backends import getlauncher
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError
from reframe.utility import typecheck as typ

from topobind.errors import TopobindError
from topobind.launch import mpi_launchers as tblaunchers
from topobind.paths import location
from topobind.validation import load as tbload
from topobind.validation import sites as tbsites

from .probe import NOT_APPLICABLE, quick_tier  # noqa: F401 (the checks import quick_tier)

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probe.py"
CHECK_FILE = "topobind-check.json"  # = topobind.report.reader.CHECK_FILE
LOAD_FILE = "load.json"
SITE_VARIABLE = "TOPOBIND_SITE"
HARNESS = tbload.harness_identity()  # this ReFrame process, for load.json


def site_for(system: str) -> tbsites.Site:
    """The site whose targets the checks use on ReFrame system ``system`` (see the module
    docstring); raises TopobindError with the fix when there is none."""
    named = os.environ.get(SITE_VARIABLE, "").strip()
    if named:
        try:
            return tbsites.load_site(named)
        except TopobindError as exc:
            raise TopobindError(f"{SITE_VARIABLE}={named}: {exc}") from None
    if system in tbsites.site_names():
        return tbsites.load_site(system)
    known = ", ".join(tbsites.site_names()) or "none"
    raise TopobindError(
        f"ReFrame system {system!r} is not a topobind site and {SITE_VARIABLE} is not set: "
        f"name the site whose targets to check against, e.g. {SITE_VARIABLE}=local reframe ... "
        f"(sites in {tbsites.sites_dir()}: {known}); nothing was run"
    )


def _current_system() -> str | None:
    try:
        return str(rt.runtime().system.name)
    except Exception:  # imported outside a ReFrame session (e.g. by a linter)
        return None


_SYSTEM = _current_system()
if _SYSTEM is not None:
    try:
        SITE: tbsites.Site | None = site_for(_SYSTEM)
    except TopobindError as _exc:
        # Stop the whole session here: ReFrame skips a test file whose import fails with an
        # ordinary error and then reports 'Ran 0/0 test case(s) ... PASSED'.
        sys.exit(f"topobind: error: {_exc}")
else:
    SITE = None


def site_settings(cls: Any) -> Any:
    """Class decorator: the site's ``settings:`` and the settings its references were
    calibrated with, as if given with ``-S`` (a ``-S`` on the command line still wins: ReFrame
    applies it after loading), so a figure is measured as its reference was under any
    configuration."""
    from reframe.core.fields import make_convertible

    if SITE is None:
        return cls
    calibrating = os.environ.get("TOPOBIND_CALIBRATING") == "1"  # set by topobind calibrate
    for key, value in (SITE.settings if calibrating else SITE.all_settings).items():
        check, _, var = str(key).rpartition(".")
        if check and check != cls.__name__:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        cls.setvar(var, make_convertible(text))  # False when this check has no such variable
    return cls


def partition_for(site: tbsites.Site, partition: Any) -> tbsites.Partition:
    """topobind's view of a ReFrame partition: the site's own partition when the configuration
    is derived from the site files, else one built from ReFrame's scheduler and launcher."""
    if partition.fullname.split(":")[0] == site.name:
        for p in site.partitions:
            if p.name == partition.name:
                return p
    scheduler = str(partition.scheduler.registered_name)
    launcher = str(partition.launcher_type.registered_name)
    slurm = scheduler in ("slurm", "squeue")
    return tbsites.Partition(
        name=partition.name,
        scheduler="slurm" if slurm else scheduler,
        launcher=tblaunchers.from_reframe(launcher),
        access=tuple(partition.access),
        environments=tuple(e.name for e in partition.environs),
        max_jobs=int(partition.max_jobs or 1),
        exclusive=bool(partition.extras.get("exclusive", slurm)),
        description=str(partition.descr),
        accounting=scheduler == "slurm",
    )


_OPENMP_PROGRAM = "#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n"
_OPENMP_VERDICTS: dict[tuple[str, str], str | None] = {}


def openmp_problem(environ: Any) -> str | None:
    """Why ReFrame environment ``environ`` cannot compile and link C with OpenMP, or None.
    Its modules are loaded and its variables set as ReFrame would; cached per process."""
    key = (environ.name, " ".join([environ.cc, *environ.cflags, *environ.modules]))
    if key in _OPENMP_VERDICTS:
        return _OPENMP_VERDICTS[key]
    flag = str((environ.extras or {}).get("omp_flag", "-fopenmp"))
    lines = ["set -e"]
    modules = rt.runtime().modules_system
    for mod in environ.modules:
        lines += modules.emit_load_commands(mod)
    for name, value in environ.env_vars.items():
        lines.append(f"export {name}={shlex.quote(str(value))}")
    with tempfile.TemporaryDirectory(prefix="topobind-omp-") as tmp:
        src = Path(tmp) / "omp.c"
        src.write_text(_OPENMP_PROGRAM)
        flags = [f for f in environ.cflags if f != flag]
        cc = shlex.join([environ.cc or "cc", *flags, flag, str(src), "-o", f"{tmp}/omp"])
        lines.append(cc)
        try:
            done = subprocess.run(
                ["bash", "-c", "\n".join(lines)],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=120,
            )
            why = None
            if done.returncode != 0:
                msg = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
                why = f"'{cc}' failed: {msg[0] if msg else f'exit {done.returncode}'}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"'{cc}' failed: {exc}"
    _OPENMP_VERDICTS[key] = why
    return why


def repo_root() -> Path:
    env = os.environ.get("TOPOBIND_ROOT")
    return Path(env) if env else HERE.parents[1]


def kernels_dir() -> Path:
    # a relative one is ignored, as topobind ignores it (the checks run in stage directories)
    return location("TOPOBIND_KERNELS_DIR") or repo_root() / "kernels" / "bin"


def topobind_cmd() -> str:
    """The topobind command of the Python that runs ReFrame (the project's venv)."""
    exe = Path(sys.executable).parent / "topobind"
    if exe.exists():
        return shlex.quote(str(exe))
    return f"{shlex.quote(sys.executable)} -m topobind"


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


#: the tiers a check runs in (variable ``tier``; '' is the session's own, quick or full)
TIERS = ("", "smoke", "quick", "full")


class TopobindCheck(rfm.RunOnlyRegressionTest):
    """Base of every topobind check: site lookup, references, kernels, launch."""

    valid_systems = ["*"]
    valid_prog_environs = ["*"]  # once per partition: see tb_pick_environment
    maintainers = ["topobind"]
    #: calibration mode: no references, and checks that need targets run anyway
    calibrating = variable(bool, value=False)
    #: fail (not only warn) when other processes shared the node while the check ran
    strict_load = variable(typ.Bool, value=False)  # typ.Bool: '-S strict_load=false' is False
    #: the node the job ran on, from its post-run line (set after the run; in ReFrame's
    #: report beside ``job_nodelist``, which a job too short for the scheduler's poll lacks)
    tb_ran_on = variable(str, value="")
    #: the evidence around this run (set before sanity; in ReFrame's report per run, read by
    #: topobind.validation.reframe_report): the ``evidence`` section of the result document
    #: the kernel wrote (docs/results-format.md), else one made of load.json's share of other
    #: processes (busy_share, the load rule's); {} when neither was written
    tb_evidence = variable(dict, value={})
    #: the matrices of this run's result document (latency's ``read_bw`` and ``latency``,
    #: c2c's ``c2c``; topobind.validation.evidence_files.matrices_in: bounded), read by
    #: validate --each-node to say where in the node it is slow (topobind.measure.where)
    tb_matrices = variable(dict, value={})
    #: a sanity-only check (no figure compared across nodes) runs in the first run of a
    #: session only, skipped in ReFrame's --reruns ('-S sanity_once=true': validate
    #: --each-node's quick tier; its verdict does not get surer by repeating it)
    sanity_once = variable(typ.Bool, value=False)
    #: the tier the kernels' results record (``tier``, from $TOPOBIND_TIER): '' is this
    #: session's, quick or full; validate --each-node's smoke tier sets 'smoke' (its figures
    #: measure no performance, and the fleet report does not judge them)
    tier = variable(str, value="")

    #: key of topobind.validation.sites.CHECKS (targets) or '' for sanity-only checks
    tb_family = ""
    #: True for checks whose only verdict is their sanity (see sanity_once)
    tb_sanity_only = False

    def tb_variant(self) -> str:
        return ""

    # ------------------------------------------------------------------ hooks
    @run_after("init")
    def tb_set_references(self) -> None:
        if self.tb_family and not self.calibrating and SITE is not None:
            refs = tbsites.reframe_references(SITE, self.tb_family, self.tb_variant())
            if refs:
                self.reference = refs

    @run_after("performance")
    def tb_warn_unreferenced(self) -> None:
        """A figure without a reference passes whatever it is: say so in the output, so a
        plain 'reframe' run on a site without targets is never a silent green."""
        if not self.tb_family or self.calibrating or SITE is None:
            return
        missing = [
            key.split(":")[-1]
            for key, v in (getattr(self, "perfvalues", None) or {}).items()
            if v[1] == 0 and v[2] is None and v[3] is None
        ]
        if missing:
            self.logger.warning(
                f"{self.display_name}: no reference for {', '.join(missing)} on site "
                f"{SITE.name}: not compared with anything (topobind calibrate --site "
                f"{SITE.name} writes references)"
            )

    @run_after("setup")
    def tb_set_site(self) -> None:
        if SITE is None:  # only when imported outside a session
            self.skip("no topobind site (see TOPOBIND_SITE)")
        if self.sanity_once and self.tb_sanity_only and rt.runtime().current_run > 0:
            self.skip("sanity only: checked in the session's first run (sanity_once)")
        self.tb_site = SITE
        self.tb_partition = partition_for(SITE, self.current_partition)
        self.tb_pick_environment()
        self.num_tasks = 1
        if self.tb_partition.exclusive:
            self.exclusive_access = True
        if location("TOPOBIND_KERNELS_DIR"):
            # an installation's one bin/ (kernels, rankexec, the shim); a checkout's topobind
            # finds its kernels/bin and rankstep/bin itself
            self.env_vars["TOPOBIND_KERNELS_DIR"] = str(kernels_dir())
        self.env_vars["TOPOBIND_WORKDIR"] = "."  # topobind run's scratch files: the stage dir
        if self.tier not in TIERS:
            raise ValueError(f"-S tier={self.tier!r}: give one of {', '.join(TIERS)}")
        self.env_vars["TOPOBIND_TIER"] = self.tier or ("quick" if quick_tier() else "full")
        # The job holds the node with one task and topobind run starts every step itself: plan
        # each layout's own rank count, not the job's one task.
        self.env_vars["TOPOBIND_IGNORE_ALLOCATION_TASKS"] = "1"
        self.tb_check_setup()

    @run_before("run")
    def tb_flux_whole_node(self) -> None:
        """A partition of ReFrame's flux scheduler: its backend builds the job's jobspec when
        the job is made, before the test's task and CPU counts reach the job (always one task
        of one core), and has no exclusive option. A check measures and places on the whole
        node, as under Slurm's --exclusive: ask Flux for one node, exclusive."""
        old = getattr(self.job, "fluxjob", None)
        if old is None:
            return
        from flux.job import JobspecV1  # the flux bindings: only where the backend loaded them

        new = JobspecV1.from_command(
            command=["/bin/bash", self.job.script_filename],
            num_tasks=1, cores_per_task=1, num_nodes=1, exclusive=True,
        )  # fmt: skip
        new.duration, new.cwd, new.environment = old.duration, old.cwd, old.environment
        new.stdout, new.stderr = old.stdout, old.stderr
        self.job.fluxjob = new

    def tb_pick_environment(self) -> None:
        """Run once per partition: in its first environment that compiles C with OpenMP."""
        tried = []
        here = self.current_environ.name
        for env in self.current_partition.environs:
            why = openmp_problem(env)
            if why is None:
                if env.name != here:
                    mine = openmp_problem(self.current_environ)
                    self.skip(
                        f"environment {here} does not compile C with OpenMP ({mine}); the "
                        f"checks run in {env.name}"
                        if mine
                        else f"runs once per partition, in its first OpenMP environment "
                        f"({env.name})"
                    )
                return
            tried.append(f"{env.name}: {why}")
        self.skip(
            f"no environment of partition {self.current_partition.fullname} compiles C with "
            f"OpenMP ({'; '.join(tried)})"
        )

    def tb_check_setup(self) -> None:
        """Per-check setup (executable, options); runs after the site is known."""

    @run_before("run")
    def tb_topobind_launches(self) -> None:
        # topobind run/verify/bench start the ranks with the plan's flags themselves.
        self.job.launcher = getlauncher("local")()

    @run_before("run")
    def tb_record_load_and_variant(self) -> None:
        """The main command runs under ``probe.py load``, which writes ``load.json`` (the CPU
        time other processes used on the node meanwhile: topobind.validation.load, which counts
        this ReFrame process as the harness, not as other work, when the job runs on its
        host); ``topobind-check.json`` names the check and its variant, so ``topobind report``
        on the output directory keeps the variants apart. Both are kept in the output
        directory."""
        label = {"check": type(self).__name__, "variant": self.tb_variant() or "-"}
        Path(self.stagedir, CHECK_FILE).write_text(json.dumps(label) + "\n")
        cmd = " ".join([str(self.executable), *map(str, self.executable_opts)])
        self.executable = f"{python_cmd()} {PROBE} load {LOAD_FILE} -- bash -c {shlex.quote(cmd)}"
        self.executable_opts = []
        self.keep_files = [*self.keep_files, CHECK_FILE, LOAD_FILE]
        self.env_vars[tbload.HARNESS_VARIABLE] = HARNESS

    @run_after("sanity")
    def tb_judge_load(self) -> None:
        """Warn when other work shared the node while the check ran (fail with
        ``-S strict_load=true``), as ``topobind calibrate`` does."""
        try:
            load = json.loads(Path(self.stagedir, LOAD_FILE).read_text())
        except (OSError, ValueError):
            return  # the command did not run: sanity has said why
        if not isinstance(load, dict) or not load.get("busy"):
            return
        msg = (
            f"{self.display_name}: other processes kept {load.get('others_cpus')} of "
            f"{load.get('cpus')} CPUs busy while it ran ({100 * load.get('others_share', 0):.0f}"
            f" % of the CPU time, busy above {100 * load.get('busy_share_limit', 0):.0f} %): "
            "its figures are not the node's own"
        )
        if self.strict_load:
            raise SanityError(msg + " (strict_load)")
        self.logger.warning(msg)

    @run_before("sanity")
    def tb_record_evidence(self) -> None:
        """:attr:`tb_evidence` of this run (topobind.validation.evidence_files: bounded);
        before sanity, so that a failed check's run has its evidence too."""
        from topobind.validation.evidence_files import evidence_in, matrices_in

        self.tb_evidence = evidence_in(self.stagedir, LOAD_FILE)
        self.tb_matrices = matrices_in(self.stagedir, LOAD_FILE)

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
        if self.tb_on_the_node():
            from topobind.topo.topology import load

            return tbsites.ExpectedNode(**tbsites.node_counts(load("live")))
        return self.tb_site.node

    def tb_on_the_node(self) -> bool:
        """This ReFrame process runs on the node the check runs on: a local partition, or
        inside the node's own job (validate --each-node). Then what applies comes from the
        node itself, whatever the site is called and whether it has a ``node:`` section (a
        site's node that differs is the conformance step's finding, not a check's FAIL)."""
        from topobind.validation.sites.reframe_config import IN_JOB_VARIABLE

        return self.tb_partition.scheduler == "local" or os.environ.get(IN_JOB_VARIABLE) == "1"

    def tb_cores(self) -> int | None:
        """Cores of the partition's node: the site's node, the live one (local checks), else
        ReFrame's processor info of the partition (e.g. from --detect-host-topology)."""
        node = self.tb_node()
        if node is not None:
            return node.cores
        return self.current_partition.processor.num_cores or None

    def tb_exit_status(self) -> int | None:
        """Exit status of the main command, echoed by the post-run line."""
        path = Path(self.stagedir) / str(self.stdout)
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return None
        for line in reversed(text.splitlines()):
            if line.startswith("topobind-exit-status: "):
                status, _, host = line.split(":", 1)[1].partition(" host: ")
                self.tb_ran_on = host.strip()
                return int(status)
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
        tail = self.tb_stderr_tail()
        if status == NOT_APPLICABLE and tail.startswith("not applicable:"):  # a node probe's
            self.skip(f"{tail} (on {self.tb_where()})")
        if status not in ok:
            raise SanityError(f"command exited with status {status} on {self.tb_where()}: "
                              f"{tail}")  # fmt: skip
        return status

    def tb_where(self) -> str:
        """The node the job ran on, for a failure message (ReFrame's own summary shows
        'Node list: None' on a batch partition whose poll missed a short job): the job's node
        list, else the node --distribute pinned the check to, else the job's post-run line."""
        nodes = list(getattr(self.job, "nodelist", None) or []) if self.job else []
        if nodes:
            return ",".join(nodes)
        pinned = re.search(r"%\.nid=(\S+)", str(self.display_name))
        return pinned.group(1) if pinned else (self.tb_ran_on or "an unknown node")

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
    """Post-run command recording the main command's exit status, and the node the job ran
    on, in the job output."""
    return ['echo "topobind-exit-status: $? host: $(hostname -s)"']


def stop_unless(assign: str) -> str:
    """A job-script line (``NAME=$(probe ...)``) that ends the job when it fails, its status
    in the status line: the check then fails with the probe's own line (its stderr's last)
    instead of running its kernel on an empty value ('exited with status 2')."""
    return f'{assign} || {{ s=$?; echo "topobind-exit-status: $s host: $(hostname -s)"; exit $s; }}'


def shell_join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def which(name: str) -> str | None:
    return shutil.which(name)
