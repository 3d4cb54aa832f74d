#!/usr/bin/env python3
"""The outputs of show, plan (every format), env and plan --check over the shipped topologies
and every layout, for proving a start-up change byte-identical (issue 28 item 6).

    scripts/bench-plan-outputs.py save before.json     # on the commit before the change
    scripts/bench-plan-outputs.py save after.json      # after it
    scripts/bench-plan-outputs.py compare before.json after.json

Every command runs in this one process (``topobind.cli.main.main``), so the ~5500 cases
take minutes, not an hour; each case keeps its exit status, stdout and stderr. The live
topology's memory sizes change between runs: ``show -t live`` is left out of the comparison.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYOUTS = ("compact", "spread", "every-other-core", "per-l3", "per-numa", "per-socket",
           "l3-groups:8", "per-gpu")  # fmt: skip
FORMATS = ("text", "picture", "json", "env", "openmpi", "openmpi4", "srun", "mpich", "intelmpi",
           "rankfile", "rankfile4", "gres", "rank-env", "rankexec", "numactl")  # fmt: skip
EXTRA = ([], ["--ranks", "4"], ["--smt", "--threads", "2"], ["--mem", "bind", "--pages", "4k"])
GPU_OPTIONS = (["--gpus-per-rank", "2"], ["--reserve", "first-core-per-l3"], ["--order", "cpu"])
NAMED = ("betzy-epyc7742", "epyc9755-nps4", "epyc9755-nps1", "skx-8160", "live")


def _cases() -> list[list[str]]:
    tops = REPO / "topologies"
    gpus = sorted(str(p) for p in (tops / "gpu").glob("*.xml"))
    out: list[list[str]] = []
    for topo in [*sorted(str(p) for p in tops.glob("*.xml")), *gpus, *NAMED]:
        out += [["show", "-t", topo], ["show", "-t", topo, "-f", "json"]]
        for layout in LAYOUTS:
            for extra in EXTRA:
                formats = FORMATS if not extra else ("json", "text")
                out += [["plan", "-t", topo, "-l", layout, "-f", f, *extra] for f in formats]
                out.append(["env", "-t", topo, "-l", layout, *extra])
            out.append(["plan", "-t", topo, "-l", layout, "--check"])
    for opt in GPU_OPTIONS:
        for topo in gpus:
            out += [["plan", "-t", topo, "-l", "per-gpu", "-f", "json", *opt],
                    ["env", "-t", topo, "-l", "per-gpu", *opt],
                    ["plan", "-t", topo, "-l", "compact", "-f", "json", *opt]]  # fmt: skip
    return out


def save(dest: str) -> None:
    from topobind.cli.main import main

    os.environ.pop("SLURM_JOB_ID", None)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        for argv in _cases():
            if argv[0] == "plan" and "--check" not in argv:
                argv = [*argv, "--rankfile", "rf", "--force"]
            o, e = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
                try:
                    status = main(argv)
                except SystemExit as exc:
                    status = exc.code
            # the run's own scratch directory (in "wrote rankfile DIR/rf") differs every run
            out, err = (text.replace(tmp, "$TMPDIR") for text in (o.getvalue(), e.getvalue()))
            results[" ".join(argv)] = [status, out, err]
    Path(dest).write_text(json.dumps(results, indent=0, sort_keys=True) + "\n")
    print(f"{len(results)} cases saved in {dest}")


def compare(before: str, after: str) -> int:
    a, b = json.loads(Path(before).read_text()), json.loads(Path(after).read_text())
    live = re.compile(r"^show -t live\b")
    differ = [k for k in a if not live.match(k) and a[k] != b.get(k)]
    print(f"{len(a)} cases, {len(differ)} differ (show -t live left out)")
    for key in differ[:10]:
        print(f"  {key}\n    before: {str(a[key])[:300]}\n    after:  {str(b.get(key))[:300]}")
    return 1 if differ or a.keys() != b.keys() else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "save":
        save(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
