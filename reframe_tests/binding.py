"""Binding: every rank and thread runs on the CPUs its plan gives it, under the launch that
``topobind run`` builds for the partition (no launcher, mpirun or srun).

``topobind verify --layout L -- topobind run --layout L --`` runs the placement probe
(kernels/bin/whereami) under the real launch and compares each thread's CPU with the plan.
The ``case`` parameter is a layout, optionally with a rank count (``spread/2``: the spread
layout with 2 ranks, a multi-rank launch even on a small node).
"""

from __future__ import annotations

import os
import sys

import reframe as rfm
from reframe.core.builtins import parameter, sanity_function
from reframe.core.exceptions import SanityError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from topobind_rfm import (  # noqa: E402
    TopobindCheck,
    read_json,
    shell_join,
    site_settings,
    status_line,
    topobind_cmd,
)

CASES = ["compact", "every-other-core", "spread/2", "per-l3", "per-numa", "l3-groups:32"]


@rfm.simple_test
@site_settings
class BindingCheck(TopobindCheck):
    descr = "threads and ranks run on their planned CPUs under topobind run's launch"
    case = parameter(CASES)
    tags = {"binding", "quick", "full"}
    tb_sanity_only = True

    def layout_args(self) -> str:
        layout, _, ranks = str(self.case).partition("/")
        return self.tb_run(layout, ranks=int(ranks) if ranks else None)

    def tb_check_setup(self) -> None:
        node = self.tb_node()
        layout = str(self.case).partition("/")[0]
        if layout in ("per-l3", "l3-groups:32"):
            self.skip_if(node is not None and node.l3_domains == 0, f"{layout} needs L3 domains")
        if self.case == "spread/2":
            self.skip_if(node is not None and node.cores < 2, "spread/2 needs two cores")
        tb = topobind_cmd()
        args = self.layout_args()
        self.prerun_cmds = [shell_join(tb, "plan", args, "--format text")]
        self.executable = shell_join(
            tb, "verify", args, "--format json -- ", tb, "run", args, *self.tb_launcher_args(), "--"
        )
        self.executable_opts = ["> verify.json"]
        self.postrun_cmds = status_line()
        self.keep_files = ["verify.json"]

    @sanity_function
    def validate(self) -> bool:
        status = self.tb_require_exit(ok=(0, 1))  # 1: verify ran and found a mismatch
        doc = read_json(os.path.join(self.stagedir, "verify.json"), f"topobind verify ({status})")
        bad = [r for r in doc["rows"] if r["status"] != "OK"]
        if bad or not doc["ok"]:
            first = "; ".join(
                f"rank {r['rank']} thread {r['thread']}: planned {r['planned']}, ran on "
                f"{r['cpu']} ({r['status']})"
                for r in bad[:4]
            )
            raise SanityError(
                f"{len(bad)} of {len(doc['rows'])} threads not on their planned CPUs (OS "
                f"indexes): {first}"
            )
        if not doc["rows"]:
            raise SanityError("the probe reported no thread")
        return True
