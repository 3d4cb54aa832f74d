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
    tb_sanity_only = True

    def tb_check_setup(self) -> None:
        self.skip_if(
            self.tb_site.node is None and not self.calibrating,
            f"site {self.tb_site.name} describes no node (add node: to its site.yaml, or run "
            f"topobind calibrate --site {self.tb_site.name})",
        )
        self.executable = f"{topobind_cmd()} show --format json > node.json"
        # on the node itself: its hugepage pools, NUMA balancing, THP, governor and the
        # site's per-host expectations (topobind.validation.conformance); one line per finding
        self.postrun_cmds = [
            *status_line(),
            f"{topobind_cmd()} site check {self.tb_site.name} --live > conformance.txt 2>&1; "
            'echo "topobind-conformance-status: $?"',
        ]
        self.keep_files = ["node.json", "conformance.txt"]

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
            and not (node.hosts and any(key in o for o in node.hosts.values()))
        ]
        wrong += self.conformance_findings()
        if wrong:
            raise SanityError(
                f"node {s.get('hostname')} does not match {where}: "
                + "; ".join(wrong)
                + " (fix the node's BIOS/boot settings or the job's allocation, or the node: "
                "section of the site)"
            )
        return True

    def conformance_findings(self) -> list[str]:
        """The findings of 'topobind site check --live' run on the node (beyond the counts)."""
        path = os.path.join(self.stagedir, "conformance.txt")
        try:
            with open(path, encoding="utf-8") as fh:
                lines = [ln.strip() for ln in fh if ln.strip()]
        except OSError:
            raise SanityError("the conformance check wrote no conformance.txt") from None
        out = []
        for ln in lines:
            text = ln.removeprefix("topobind: error: ")
            if ": expected " not in text:
                continue
            text = text.rsplit(" (", 1)[0]  # drop the file the expectation came from
            key = text.split(": ")[1] if text.count(": ") >= 2 else ""
            # the counts are compared above, unless hosts: overrides them per host
            if key not in ("packages", "numa_nodes", "l3_domains", "cores", "smt") or (
                self.tb_site.node is not None and self.tb_site.node.hosts
            ):
                out.append(text)
        return out
