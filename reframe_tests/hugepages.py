"""Free 1 GiB pages on every NUMA node of the partition's node >= the site's requirement
(``hugepages.pages_1g_per_numa``). When short, the failure message is the exact command
that fixes it (as root).
"""

from __future__ import annotations

import os
import sys

import reframe as rfm
from reframe.core.builtins import performance_function, sanity_function, variable
from reframe.core.exceptions import SanityError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from topobind_rfm import PROBE, TopobindCheck, python_cmd, read_json, site_settings, status_line  # noqa: E402

from topobind.validation.sites import HUGEPAGES_1G_NR  # noqa: E402

GIB_KIB = "1048576"


@rfm.simple_test
@site_settings
class HugepagesCheck(TopobindCheck):
    descr = "enough free 1 GiB pages on every NUMA node"
    #: override the site's requirement (free 1 GiB pages per NUMA node); -1: the site's
    pages_1g_per_numa = variable(int, value=-1)
    tags = {"quick", "full"}
    tb_sanity_only = True  # free_1g_min is a count, judged by the site, not across nodes

    def tb_check_setup(self) -> None:
        self.executable = f"{python_cmd()} {PROBE} hugepages > hugepages.json"
        self.postrun_cmds = status_line()
        self.keep_files = ["hugepages.json"]

    def need_per_numa(self) -> int:
        if self.pages_1g_per_numa >= 0:
            return int(self.pages_1g_per_numa)
        return self.tb_site.hugepages.pages_1g_per_numa

    def pools(self) -> dict:
        self.tb_require_exit()
        return read_json(os.path.join(self.stagedir, "hugepages.json"), "hugepage probe")

    @sanity_function
    def validate(self) -> bool:
        need = self.need_per_numa()
        pool = self.pools().get(GIB_KIB)
        if need == 0:
            return True
        if pool is None and self.pools().get("cpu_1g_pages") is False:
            self.skip(f"not applicable: this CPU has no 1 GiB pages (no pdpe1gb in its flags) "
                      f"on {self.tb_where()}; the site's pages_1g_per_numa {need} cannot "
                      "apply to it")  # fmt: skip
        if pool is None:
            raise SanityError(
                "this node has no 1 GiB hugepage pool (no /sys/kernel/mm/hugepages/"
                "hugepages-1048576kB): boot with hugepagesz=1G hugepages=N on a CPU with pdpe1gb"
            )
        nodes = pool["nodes"] or {"0": {"nr": pool["nr"], "free": pool["free"]}}
        short = {n: need - v["free"] for n, v in sorted(nodes.items()) if v["free"] < need}
        if short:
            total = pool["nr"] + sum(short.values())
            first = next(iter(short))
            per_node = "; ".join(
                f"echo {nodes[n]['nr'] + d} > /sys/devices/system/node/node{n}/hugepages/"
                f"hugepages-1048576kB/nr_hugepages"
                for n, d in short.items()
            )
            raise SanityError(
                f"NUMA node {first} has {nodes[first]['free']} free 1 GiB pages, the site "
                f"requires {need} on every NUMA node; as root run: echo {total} > "
                f"{HUGEPAGES_1G_NR} (or per NUMA node: {per_node})"
            )
        return True

    @performance_function("pages")
    def free_1g_min(self) -> float:
        pool = self.pools().get(GIB_KIB)
        if not pool:
            return 0.0
        nodes = pool["nodes"] or {"0": {"free": pool["free"]}}
        return float(min(v["free"] for v in nodes.values()))
