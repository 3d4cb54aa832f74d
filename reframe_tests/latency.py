"""Memory latency and core-to-core latency. Like every check, they run whether or not the
site has targets for them yet (figures without a target show as ``PASS (no ref)``).

LatencyCheck: kernels/bin/latency, one thread on NUMA node 0 with its memory there
(``numactl -N 0 -m 0`` + ``topobind run --layout compact --ranks 1 --threads 1``);
latency_ns = median ns per dependent load at the largest working set.

C2CCheck: kernels/bin/c2c between two cores of one L3 domain (``same-l3``) or the first
cores of the first two L3 domains (``cross-l3``), chosen on the node by the probe;
c2c_ns = the pair's median one-way latency.

Cost model. LatencyCheck: per working-set size ``trials`` (3) x at least ``min_time`` (0.1 s;
the smoke tier's 0.01 s) of dependent loads, plus building the random chain of the largest
size (one pass over it); the largest size decides (default sizes 16K..1G). The quick tier
(``-t quick``) measures two sizes, ``quick_small`` (2M; '' leaves it out) and the rule's 4x
the LLC (at least 256M), the latter capped at ``max_working_set`` (the site's ``settings:``;
default 1G) with a warning when the cap is under the rule; on a node of several NUMA nodes it
also measures the per-NUMA read-bandwidth row (``--bw-matrix --bw-local``: each node's CPUs
reading their own node's memory, an array of the same size: one first touch and 4 passes a NUMA
node, about a second a node at 1G, run before the check's own, outside its binding;
``quick_bw_row=false`` leaves it out), which validate --each-node reads to say where in a
slow node it is slow (topobind.measure.where). C2CCheck: ``samples`` x 5000 round trips of
one cache line (milliseconds); the quick tier runs ``quick_samples`` (3).
"""

from __future__ import annotations

import os
import shlex
import sys

import reframe as rfm
from reframe.core.builtins import parameter, performance_function, sanity_function, variable
from reframe.core.exceptions import SanityError
from reframe.utility import typecheck as typ

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

LATENCY_TAGS = {"latency", "quick", "full"}
#: on a node of several NUMA nodes (sysfs, on the node itself), the per-NUMA bandwidth row:
#: its own run of the kernel, outside the check's binding (numactl -N 0 and one CPU would leave
#: it node 0's CPU only), into numa-bw.json (after latency.json: its evidence stays the
#: check's); a failure only loses the row, and says so
MULTI_NUMA_BW_ROW = (
    "nn=$(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l); "
    'if [ "$nn" -gt 1 ]; then {kernel} --sizes 16K --min-time 0.001 --trials 1 --bw-matrix '
    '--bw-local --bw-size "$lsize" --pages {pages} --json numa-bw.json || echo "latency: the '
    'per-NUMA bandwidth row failed (status $?): no where" >&2; fi'
)


def _load_one(check: TopobindCheck, pattern: str, kernel: str):  # ->
    # topobind.measure.results.Result
    from topobind.measure.results import load_result

    check.tb_require_exit()
    files = check.tb_glob(pattern)
    if len(files) != 1:
        raise SanityError(f"expected one {kernel} result, found {len(files)}")
    try:
        r = load_result(files[0])
    except Exception as exc:
        raise SanityError(str(exc)) from None
    if not r.valid:
        raise SanityError(f"{kernel} result invalid: {r.validation}")
    return r


@rfm.simple_test
@site_settings
class LatencyCheck(TopobindCheck):
    descr = "memory load latency, thread and memory on NUMA node 0"
    tb_family = "latency"
    #: working-set sizes ('' = the kernel's default, up to 1G)
    sizes = variable(str, value="")
    pages = variable(str, value="auto")
    #: quick tier: the cap on the largest working set (binary suffixes), and the small size
    #: measured beside it ('' for the largest only: validate --each-node's quick tier)
    max_working_set = variable(str, value="1G")
    quick_small = variable(str, value="2M")
    #: seconds of dependent loads a trial at least (the kernel's --min-time; the smoke tier's
    #: 0.01 cuts its fixed 3 x 0.1 s, and the calibration before them, to a tenth)
    min_time = variable(float, value=0.1)
    #: quick tier, a node of several NUMA nodes: the per-NUMA read-bandwidth row (the
    #: read_bw matrix's diagonal) beside the latency
    quick_bw_row = variable(typ.Bool, value=True)
    tags = LATENCY_TAGS

    def tb_variant(self) -> str:
        return "local"

    def tb_check_setup(self) -> None:
        self.skip_if(which("numactl") is None, "numactl is not installed")
        args = self.tb_run("compact", ranks=1, threads=1)
        self.executable = shell_join(
            "numactl --cpunodebind=0 --membind=0", topobind_cmd(), "run", args,
            *self.tb_launcher_args(), "--", str(kernels_dir() / "latency"),
        )  # fmt: skip
        opts = ["--pages", str(self.pages), "--min-time", f"{self.min_time:g}", "--json",
                "latency.json"]  # fmt: skip
        if self.sizes:
            opts = ["--sizes", str(self.sizes), *opts]
        elif quick_tier():
            size = f"{python_cmd()} {PROBE} latency-size {shlex.quote(str(self.max_working_set))}"
            self.prerun_cmds = [stop_unless(f"lsize=$({size})"), "export lsize"]
            small = f"{self.quick_small}," if self.quick_small else ""
            opts = ["--sizes", f'"{small}$lsize"', *opts]
            if self.quick_bw_row:
                kernel = shlex.quote(str(kernels_dir() / "latency"))
                pages = shlex.quote(str(self.pages))
                self.prerun_cmds.append(MULTI_NUMA_BW_ROW.format(kernel=kernel, pages=pages))
        self.executable_opts = opts
        self.postrun_cmds = status_line()
        self.keep_files = ["latency.json", "latency-size.json", "numa-bw.json"]

    @sanity_function
    def validate(self) -> bool:
        size = os.path.join(self.stagedir, "latency-size.json")
        if os.path.exists(size) and read_json(size, "latency-size").get("note"):
            self.logger.warning(f"{self.display_name}: {read_json(size, 'latency-size')['note']}")
        r = _load_one(self, "latency.json", "latency")
        if "latency" in self.tb_site.hugepages.enforce_in and (
            r.pages is None or r.pages.kib != 1048576
        ):
            raise SanityError(
                self.tb_hugepage_hint(
                    "latency", r.pages.kib if r.pages else None, r.pages.note if r.pages else ""
                )
            )
        return r.headline is not None

    @performance_function("ns")
    def latency_ns(self) -> float:
        r = _load_one(self, "latency.json", "latency")
        assert r.headline is not None
        return r.headline.value


@rfm.simple_test
@site_settings
class C2CCheck(TopobindCheck):
    descr = "core-to-core latency inside one L3 domain or across two"
    tb_family = "c2c"
    pair = parameter(["same-l3", "cross-l3"])
    samples = variable(int, value=7)
    quick_samples = variable(int, value=3)
    tags = LATENCY_TAGS

    def tb_variant(self) -> str:
        return str(self.pair)

    def tb_check_setup(self) -> None:
        node = self.tb_node()
        if node is not None:
            if self.pair == "cross-l3":
                self.skip_if(
                    node.l3_domains < 2,
                    f"not applicable: the node has "
                    f"{node.l3_domains} L3 domain(s); cross-l3 needs two",
                )
            else:
                self.skip_if(
                    node.l3_domains == 0 or node.cores // max(node.l3_domains, 1) < 2,
                    "same-l3 needs an L3 domain of two cores",
                )
        pick = f"cpus=$({python_cmd()} {PROBE} pick-cpus {self.pair})"
        self.prerun_cmds = [stop_unless(pick), "export cpus"]
        self.executable = str(kernels_dir() / "c2c")
        self.executable_opts = [
            '--cpus "$cpus"',
            "--samples",
            str(min(self.samples, self.quick_samples) if quick_tier() else self.samples),
            "--json",
            "c2c.json",
        ]
        self.postrun_cmds = status_line()
        self.keep_files = ["c2c.json"]

    @sanity_function
    def validate(self) -> bool:
        return _load_one(self, "c2c.json", "c2c").headline is not None

    @performance_function("ns")
    def c2c_ns(self) -> float:
        r = _load_one(self, "c2c.json", "c2c")
        assert r.headline is not None
        return r.headline.value
