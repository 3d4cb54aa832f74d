"""STREAM bandwidth per layout (kernels/bin/stream under ``topobind run``).

Variants (the ``layout`` parameter; site targets are keyed by it):

  compact                one process, one thread on every core (Betzy: 128 threads)
  every-other-core       one process, every other core of each L3 domain (Betzy: 64 threads)
  per-l3                 one rank per L3 domain, its cores as threads, through the launcher;
                         the figures are the best trial-by-trial sums over the ranks
  numa                   one process on every core of NUMA node 0 (numactl -N 0 -m 0)
  numa-every-other-core  one process on every other core of NUMA node 0 (Betzy: 8 threads)
  l3-groups:32           neighbouring L3 domains of one NUMA node bundled up to 32 threads,
                         one rank each, through the launcher (trial-by-trial sums)

Cost model: one trial moves 10 arrays' worth of bytes (copy 2, scale 2, add 3, triad 3; 8 bytes
an element), so a run moves ``trials x 80 x elements`` bytes and holds 3 arrays. The rule for
the array size is each array at least 4x the node's last-level cache (the kernel's default;
what makes the figure memory bandwidth, not cache): a 260 MiB LLC gives 136M elements, 1.09 GB
an array, 10.9 GB a trial. The full tier runs ``trials`` (20) at the rule's size. The quick tier
(``-t quick``) caps the bytes moved per run at ``max_bytes_per_run`` (the site's
``settings:``; default 16G) and spends it on trials at the rule's size first: as many as fit,
from ``quick_trials`` (3) up to ``trials`` (a 32 MiB LLC: 1.34 GB a trial, 12 trials under
16G; the figure is the best timed trial, and a trial of ~0.1 s is spoilt by any other process
that runs in it, so 2 timed trials halved it now and then). When even ``quick_trials`` do not
fit, it runs that many of a smaller size and says so (``stream-size.json`` and a warning),
since the figure may then be partly cache. The quick tier leaves out the job's text plan
(each topobind start-up is about a second on a busy 2-core node); ``topobind run
--plan-json`` writes the plan it launches, which sanity compares placement with (no
separate ``topobind plan``).

Sanity: every rank's result validates (STREAM's own check), every thread ran on its
planned CPU, and, where the site enforces it, the arrays got 1 GiB pages.
"""

from __future__ import annotations

import os
import shlex
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
    PROBE,
    TopobindCheck,
    kernels_dir,
    python_cmd,
    quick_tier,
    read_json,
    shell_join,
    site_settings,
    status_line,
    stop_unless,
    topobind_cmd,
    which,
)

from topobind.measure.stats import concurrent_best  # noqa: E402
from topobind.validation.sites import CHECKS  # noqa: E402

QUICK_LAYOUTS = ("compact", "every-other-core", "per-l3", "numa")

NUMA0 = "numactl --cpunodebind=0 --membind=0"


@rfm.simple_test
@site_settings
class StreamCheck(TopobindCheck):
    descr = "STREAM Copy/Scale/Add/Triad bandwidth under a topobind layout"
    tb_family = "stream"
    layout = parameter(list(CHECKS["stream"].variants))
    #: elements per array ('' = the kernel's default: at least 4x the last-level cache)
    elements = variable(str, value="")
    trials = variable(int, value=20)
    #: page size of the arrays: 1G, 2M, thp, 4k or auto
    pages = variable(str, value="auto")
    nontemporal = variable(bool, value=False)
    #: quick tier: trials, and the cap on the bytes moved per run (binary suffixes)
    quick_trials = variable(int, value=3)
    max_bytes_per_run = variable(str, value="16G")
    tags = {"bandwidth", "full"}

    def tb_variant(self) -> str:
        return str(self.layout)

    @run_after("init")
    def set_quick(self) -> None:
        if self.layout in QUICK_LAYOUTS:
            self.tags = self.tags | {"quick"}

    def plan_args(self) -> tuple[str, str]:
        """(prefix, topobind plan/run arguments) of this variant."""
        if self.layout == "compact":
            return "", self.tb_run("compact", ranks=1)
        if self.layout == "every-other-core":
            return "", self.tb_run("every-other-core", ranks=1)
        if self.layout == "numa":
            return NUMA0, self.tb_run("compact", ranks=1)
        if self.layout == "numa-every-other-core":
            return NUMA0, self.tb_run("every-other-core", ranks=1)
        return "", self.tb_run(str(self.layout))  # per-l3, l3-groups:N: one rank per domain

    def tb_check_setup(self) -> None:
        node = self.tb_node()
        if self.layout in ("per-l3", "l3-groups:32"):
            self.skip_if(
                node is not None and node.l3_domains == 0,
                f"layout {self.layout} needs L3 domains; the node has none",
            )
        prefix, args = self.plan_args()
        if prefix:
            self.skip_if(which("numactl") is None, "numactl is not installed")
        tb = topobind_cmd()
        # the text plan is for the eye; topobind run writes the plan it launches (plan.json)
        self.prerun_cmds = [shell_join(prefix, tb, "plan", args, "--format text")]
        self.executable = shell_join(
            prefix, tb, "run", args, *self.tb_launcher_args(), "--plan-json plan.json", "--",
            str(kernels_dir() / "stream"),
        )  # fmt: skip
        trials = self.trials
        opts = ["--pages", str(self.pages)]
        if quick_tier():
            self.prerun_cmds.pop()  # the text plan, for the eye only: one Python start-up less
            size = shell_join(
                python_cmd(), str(PROBE), "stream-size", str(max(1, self.quick_trials)),
                shlex.quote(str(self.max_bytes_per_run)), shlex.quote(str(self.elements or "")),
                str(max(1, self.quick_trials, self.trials)),
            )  # fmt: skip
            # "ELEMENTS TRIALS": as many trials as the cap allows at the rule's size
            read = 'read -r elements trials <<< "$size" && export elements trials'
            self.prerun_cmds[:0] = [stop_unless(f"size=$({size})"), read]
            trials = '"$trials"'
            opts += ["--elements", '"$elements"']
        elif self.elements:
            opts += ["--elements", str(self.elements)]
        opts = ["--trials", str(trials), *opts]
        if self.nontemporal:
            opts.append("--nontemporal")
        self.executable_opts = [*opts, "--json", "stream.{rank}.json"]
        self.postrun_cmds = status_line()
        self.keep_files = ["plan.json", "stream.*.json", "stream-size.json"]

    # ------------------------------------------------------------------ sanity
    def results(self) -> list:
        cached = getattr(self, "_tb_results", None)
        if cached is not None:
            return cached
        from topobind.measure.results import load_result

        status = self.tb_require_exit(ok=(0, 4))  # 4: ran, but STREAM's validation failed
        plan = read_json(os.path.join(self.stagedir, "plan.json"), "topobind plan")
        files = self.tb_glob("stream.*.json")
        if len(files) != plan["nranks"]:
            raise SanityError(
                f"{len(files)} STREAM results for {plan['nranks']} planned ranks "
                f"(exit status {status}: {self.tb_stderr_tail()})"
            )
        results = []
        for f in files:
            try:
                results.append(load_result(f))
            except Exception as exc:  # a TopobindError naming the file and the defect
                raise SanityError(str(exc)) from None
        for r in results:
            if not r.valid:
                raise SanityError(f"STREAM validation failed on rank {r.rank}: {r.validation}")
        for r in results:
            ranks = plan["ranks"]
            planned = ranks[(r.rank or 0) % len(ranks)]["places"]
            for p in r.placement:
                if p.thread >= len(planned) or p.cpu not in planned[p.thread]:
                    want = planned[p.thread] if p.thread < len(planned) else "none"
                    raise SanityError(
                        f"rank {p.rank} thread {p.thread} ran on CPU {p.cpu} (OS index), "
                        f"planned {want}: the binding is wrong"
                    )
            if "stream" in self.tb_site.hugepages.enforce_in:
                kib = r.pages.kib if r.pages else None
                if kib != 1048576:
                    raise SanityError(
                        self.tb_hugepage_hint("stream", kib, r.pages.note if r.pages else "")
                    )
        self._tb_results = results
        return results

    @sanity_function
    def validate(self) -> bool:
        size = os.path.join(self.stagedir, "stream-size.json")
        if os.path.exists(size):
            note = read_json(size, "stream-size").get("note")
            if note:
                self.logger.warning(f"{self.display_name}: {note}")
        return bool(self.results())

    def total(self, metric: str) -> float:
        """The node's bandwidth: one rank's best trial, or for several ranks the best of the
        trial-by-trial sums (trial i of every rank runs side by side), never the sum of each
        rank's best trial, which come from different moments and overstate the node."""
        ms = [r.metrics[metric] for r in self.results()]
        if len(ms) == 1:
            return float(ms[0].best)
        return concurrent_best([m.trials[m.warmup :] for m in ms], ms[0].higher_is_better)

    @performance_function("MB/s")
    def copy(self) -> float:
        return self.total("copy")

    @performance_function("MB/s")
    def scale(self) -> float:
        return self.total("scale")

    @performance_function("MB/s")
    def add(self) -> float:
        return self.total("add")

    @performance_function("MB/s")
    def triad(self) -> float:
        return self.total("triad")
