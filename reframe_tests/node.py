"""The node matches the site's description (``node:`` in site.yaml, or the node recorded by
``topobind calibrate``): packages, NUMA nodes, L3 domains, cores and SMT, as
``topobind show --format json`` counts them on the partition's node. A node booted with
another NUMA mode (NPS1 instead of NPS4), with SMT off, or a job given fewer cores than the
node has, fails here before any bandwidth figure is misread.
"""

from __future__ import annotations

import os
import sys

import reframe as rfm
from reframe.core.builtins import sanity_function
from reframe.core.exceptions import SanityError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from topobind_rfm import TopobindCheck, read_json, site_settings, status_line, topobind_cmd  # noqa: E402


@rfm.simple_test
@site_settings
class NodeCheck(TopobindCheck):
    descr = "the partition's node has the site's packages, NUMA nodes, L3 domains, cores, SMT"
    tags = {"quick", "full", "binding"}

    def tb_check_setup(self) -> None:
        self.skip_if(
            self.tb_site.node is None and not self.calibrating,
            f"site {self.tb_site.name} describes no node (add node: to its site.yaml, or run "
            f"topobind calibrate --site {self.tb_site.name})",
        )
        self.executable = f"{topobind_cmd()} show --format json > node.json"
        self.postrun_cmds = status_line()
        self.keep_files = ["node.json"]

    @sanity_function
    def validate(self) -> bool:
        self.tb_require_exit()
        doc = read_json(os.path.join(self.stagedir, "node.json"), "topobind show")
        s = doc["summary"]
        live = {
            "packages": s["packages"],
            "numa_nodes": len(s["numa_nodes"]),
            "l3_domains": s["l3_domains"],
            "cores": s["cores"],
            "smt": s["smt"],
        }
        node = self.tb_site.node
        if node is None:  # calibrating: nothing to compare yet
            return True
        where = node.origin or str(self.tb_site.path)
        wrong = [
            f"{key}: expected {getattr(node, key)}, found {value}"
            for key, value in live.items()
            if getattr(node, key) != value
        ]
        if wrong:
            raise SanityError(
                f"node {s.get('hostname')} does not match {where}: "
                + "; ".join(wrong)
                + " (fix the node's BIOS/boot settings or the job's allocation, or the node: "
                "section of the site)"
            )
        return True
