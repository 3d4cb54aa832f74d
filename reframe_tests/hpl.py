"""HPL on the whole node through ``topobind bench hpl`` (HPL of Debian's hpcc, or xhpl).

One MPI rank per core (compact layout), ``runs`` runs in one job. Variants (``size``):

  quick  N = quick_n (4000), one run: a smoke test that HPL runs and passes its residual check
  full   the site's size (``HplCheck.n`` or ``HplCheck.mem_fraction`` in its settings),
         ``runs`` runs (default 3): GFLOP/s and run-to-run variability

Cost model: HPL does 2/3 N^3 floating-point operations (N=4000: 43 GFLOP, seconds at a few
GFLOP/s; hpcc also runs the other HPC Challenge tests, about as long again) and holds N^2 x 8
bytes (N=4000: 128 MB); the quick variant is one run at quick_n, the full one ``runs`` runs at
the site's size.

Performance variables: gflops (median of the runs), efficiency (median / the node's peak,
``node.peak_gflops`` of the site, in %), max_slowdown (slowest run vs the median, in %,
with two runs or more). Sanity: every run's residual check PASSED; where the site enforces
1 GiB pages for hpl, the matrix got them (the libtbhugepages.so shim).
"""

from __future__ import annotations

import os
import subprocess
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, sanity_function, variable
from reframe.core.exceptions import SanityError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from topobind_rfm import PROBE, TopobindCheck, python_cmd, site_settings, status_line, topobind_cmd  # noqa: E402


def hpl_driver_missing() -> str | None:
    """Why ``topobind bench hpl`` cannot be used here, or None."""
    cmd = f"{topobind_cmd()} bench hpl --help"
    try:
        done = subprocess.run(
            cmd, shell=True, capture_output=True, text=True, errors="replace", timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"'{cmd}' failed: {exc}"
    if done.returncode != 0:
        return f"the HPL driver 'topobind bench hpl' is missing ({done.stderr.strip()[-200:]})"
    return None


@rfm.simple_test
@site_settings
class HplCheck(TopobindCheck):
    descr = "HPL GFLOP/s, efficiency vs the node's peak, run-to-run variability"
    tb_family = "hpl"
    size = parameter(["quick", "full"])
    #: matrix order of the full variant (0: from mem_fraction, else the driver's default)
    n = variable(int, value=0)
    #: fraction of the node's memory for the full variant's matrix (0: the driver's default)
    mem_fraction = variable(float, value=0.0)
    runs = variable(int, value=3)
    #: matrix order of the quick variant
    quick_n = variable(int, value=4000)
    tags = {"variability", "full"}

    def tb_variant(self) -> str:
        return str(self.size)

    @run_after("init")
    def set_quick(self) -> None:
        if self.size == "quick":
            self.tags = self.tags | {"quick"}

    def tb_check_setup(self) -> None:
        why = hpl_driver_missing()
        self.skip_if(why is not None, str(why))
        if self.tb_partition.scheduler != "local":
            # mpirun inside a batch job starts no more ranks than the job has tasks: ask the
            # scheduler for one task per core, the ranks topobind bench hpl launches.
            cores = self.tb_cores()
            self.skip_if(
                cores is None,
                f"the cores of partition {self.current_partition.fullname}'s node are unknown "
                f"(add node: to site_configs/{self.tb_site.name}/site.yaml, or run topobind "
                f"calibrate --site {self.tb_site.name})",
            )
            self.num_tasks = self.num_tasks_per_node = int(cores or 1)
        runs = 1 if self.size == "quick" else max(1, self.runs)
        opts = ["--layout compact", '--ranks "$ranks"', f"--repeat {runs}", "--results hpl"]
        if self.size == "quick":
            opts.append(f"--n {self.quick_n}")
        elif self.n:
            opts.append(f"--n {self.n}")
        elif self.mem_fraction:
            opts.append(f"--mem-fraction {self.mem_fraction}")
        if "hpl" in self.tb_site.hugepages.enforce_in:
            opts += ["--pages 1G", "--strict"]
        self.prerun_cmds = [f"export ranks=$({python_cmd()} {PROBE} cores)"]
        self.executable = f"{topobind_cmd()} bench hpl " + " ".join(opts)
        self.postrun_cmds = status_line()
        self.keep_files = ["hpl/*/hpl/*.json"]
        self.tb_runs = runs
        perf = {"gflops": sn.make_performance_function(self.median_gflops, "GFLOP/s")}
        node = self.tb_node()
        self.tb_peak = self.tb_site.node.peak_gflops if self.tb_site.node else None
        if node is not None and self.tb_peak:
            perf["efficiency"] = sn.make_performance_function(self.efficiency, "%")
        if runs >= 2:
            perf["max_slowdown"] = sn.make_performance_function(self.max_slowdown, "%")
        self.perf_variables = perf

    def summary(self):  # -> topobind.measure.stats.Summary
        cached = getattr(self, "_tb_summary", None)
        if cached is not None:
            return cached
        from topobind.measure.results import load_result
        from topobind.measure.stats import summarize

        self.tb_require_exit()
        files = self.tb_glob("hpl/*/hpl/*.json")
        if len(files) != self.tb_runs:
            raise SanityError(f"{len(files)} HPL results for {self.tb_runs} runs")
        values = []
        for f in files:
            try:
                r = load_result(f)
            except Exception as exc:
                raise SanityError(str(exc)) from None
            if not r.valid or "PASSED" not in r.validation:
                raise SanityError(f"HPL residual check did not pass: {r.validation}")
            values.append(r.metrics["gflops"].median or r.metrics["gflops"].best)
        self._tb_summary = summarize(values, higher_is_better=True)
        return self._tb_summary

    @sanity_function
    def validate(self) -> bool:
        return self.summary() is not None

    def median_gflops(self) -> float:
        return self.summary().median

    def efficiency(self) -> float:
        return 100.0 * self.summary().median / float(self.tb_peak)

    def max_slowdown(self) -> float:
        return 100.0 * max(self.summary().slowdown_vs_median)
