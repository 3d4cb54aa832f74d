"""DGEMM run-to-run variability on the whole node, by page size (kernels/bin/dgemm).

One process, one OpenMP thread per core (``topobind run --layout compact --ranks 1``),
``reps`` timed repetitions (default 20) of C = A*B of order ``n``. The ``pages`` parameter
compares 1 GiB pages with 2 MiB and 4 KiB ones (McCalpin's SC18 study: with 2 MiB pages
some repetitions run more than 5 % slower than the median of their node, with 1 GiB pages
that tail disappears).

Cost model: each repetition does 2 n^3 floating-point operations on 3 n^2 x 8 bytes (n=2000:
16 GFLOP, 96 MB), so a run is ``reps`` x 2 n^3 flops; the quick variant (the 2 MiB pages one)
runs the same n and reps.

Performance variables (statistics of the repetitions, topobind.measure.stats):
  gflops            median GFLOP/s
  max_slowdown      slowest repetition vs the median, in %
  cv                coefficient of variation, in %
  frac_slower_5pct  share of repetitions more than 5 % slower than the median, in %

Sanity: the product validates (the kernel checks random entries against a dot product),
every thread ran on its planned CPU, and where the site enforces 1 GiB pages for dgemm,
the 1G variant really got them.
"""

from __future__ import annotations

import os
import sys

import reframe as rfm
from reframe.core.builtins import (
    parameter,
    performance_function,
    run_after,
    sanity_function,
    variable,
)
from reframe.core.exceptions import SanityError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from topobind_rfm import (  # noqa: E402
    TopobindCheck,
    kernels_dir,
    read_json,
    shell_join,
    site_settings,
    status_line,
    topobind_cmd,
)

from topobind.validation.sites import CHECKS  # noqa: E402


@rfm.simple_test
@site_settings
class DgemmCheck(TopobindCheck):
    descr = "DGEMM variability over repetitions on all cores, by page size"
    tb_family = "dgemm"
    pages = parameter(list(CHECKS["dgemm"].variants))
    n = variable(int, value=2048)
    reps = variable(int, value=20)
    tags = {"variability", "full"}

    def tb_variant(self) -> str:
        return str(self.pages)

    @run_after("init")
    def set_quick(self) -> None:
        if self.pages == "1G":
            self.tags = self.tags | {"quick"}

    def tb_check_setup(self) -> None:
        tb = topobind_cmd()
        args = self.tb_run("compact", ranks=1)
        # topobind run writes the plan it launches (no separate topobind plan start-up)
        self.executable = shell_join(
            tb, "run", args, *self.tb_launcher_args(), "--plan-json plan.json", "--",
            str(kernels_dir() / "dgemm"),
        )  # fmt: skip
        self.executable_opts = [
            "--n", str(self.n), "--reps", str(self.reps), "--pages", str(self.pages),
            "--json", "dgemm.{rank}.json",
        ]  # fmt: skip
        self.postrun_cmds = status_line()
        self.keep_files = ["plan.json", "dgemm.*.json"]

    def summary(self):  # -> topobind.measure.stats.Summary
        cached = getattr(self, "_tb_summary", None)
        if cached is not None:
            return cached
        from topobind.measure.results import load_result
        from topobind.measure.stats import summarize

        self.tb_require_exit(ok=(0, 4))
        plan = read_json(os.path.join(self.stagedir, "plan.json"), "topobind plan")
        files = self.tb_glob("dgemm.*.json")
        if len(files) != 1:
            raise SanityError(f"expected one DGEMM result, found {len(files)}")
        try:
            r = load_result(files[0])
        except Exception as exc:
            raise SanityError(str(exc)) from None
        if not r.valid:
            raise SanityError(f"DGEMM check failed: {r.validation}")
        places = plan["ranks"][0]["places"]
        for p in r.placement:
            if p.thread >= len(places) or p.cpu not in places[p.thread]:
                raise SanityError(
                    f"thread {p.thread} ran on CPU {p.cpu} (OS index), planned "
                    f"{places[p.thread] if p.thread < len(places) else 'none'}"
                )
        kib = r.pages.kib if r.pages else None
        if self.pages == "1G" and "dgemm" in self.tb_site.hugepages.enforce_in and kib != 1048576:
            raise SanityError(self.tb_hugepage_hint("dgemm", kib, r.pages.note if r.pages else ""))
        trials = r.metrics["gflops"].trials
        if len(trials) < 2:
            raise SanityError(f"{len(trials)} repetition(s): variability needs at least 2")
        self._tb_summary = summarize(trials, higher_is_better=True)
        return self._tb_summary

    @sanity_function
    def validate(self) -> bool:
        return self.summary() is not None

    @performance_function("GFLOP/s")
    def gflops(self) -> float:
        return self.summary().median

    @performance_function("%")
    def max_slowdown(self) -> float:
        return 100.0 * max(self.summary().slowdown_vs_median)

    @performance_function("%")
    def cv(self) -> float:
        return 100.0 * (self.summary().cv or 0.0)

    @performance_function("%")
    def frac_slower_5pct(self) -> float:
        return 100.0 * self.summary().frac_slower_5pct
