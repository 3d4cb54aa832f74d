"""The local 3-node cluster made into a small fleet with faults: shared by
``scripts/bench-acceptance.py`` and ``tests/validation/test_fleet_slurm.py`` (which imports it
with ``scripts/`` on ``sys.path``).

- :func:`fleet_sites`: a sites directory holding site ``fleet``, the local site (its quick
  tier's bounds, ``max_jobs: 1``) with a ``node:`` section this machine meets, and optional
  per-host expectations (a node made non-conforming: the nodes share this machine's
  hardware, so a real difference cannot be made per node).
- :func:`cpu_quota`: one node's slurmd, so every job it starts, in a cgroup of a share of
  one CPU (cgroup v1 ``cpu.cfs_quota_us`` or v2 ``cpu.max``): a slow node.
- :data:`THROTTLED_STREAM`: the STREAM check that such a quota slows in every run.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: The STREAM check the tests run against a node under :func:`cpu_quota`: single-threaded
#: (one core of two), 10 trials, 16M elements (384 MB a triad). STREAM reports each kernel's
#: best trial, so a trial that fits in one unthrottled stretch is not slowed at all. A
#: stretch is the quota (1 ms) plus what the task overruns it by before the scheduler's next
#: tick throttles it (up to a tick: 4 ms at HZ=250). With 4M elements a copy trial took about
#: 3 ms: a busy CI machine gave node3 under 10 % one full-speed trial in one of its three runs
#: for every kernel (2 of 3 runs beyond the limit: not named). A 16M trial takes over 10 ms.
THROTTLED_STREAM = ["-n", "StreamCheck%layout=every-other-core", "-S", "StreamCheck.elements=16M",
                    "-S", "StreamCheck.trials=10"]  # fmt: skip


def fleet_sites(tmp: Path, per_host: str = "") -> Path:
    """``tmp/sites`` with site ``fleet`` (give it as ``TOPOBIND_SITES_DIR``); ``per_host``:
    one ``hosts:`` entry, e.g. ``node2: {hugepages_2m_per_numa: 100000}``."""
    if str(REPO / "src") not in sys.path:
        sys.path.insert(0, str(REPO / "src"))
    from topobind.topo.topology import load
    from topobind.validation.sites import node_counts

    d = tmp / "sites" / "fleet"
    d.mkdir(parents=True)
    text = (REPO / "site_configs" / "local" / "site.yaml").read_text()
    text = text.replace("name: local", "name: fleet").replace("references: references.yaml", "")
    text += "node:\n" + "".join(f"  {k}: {v}\n" for k, v in node_counts(load("live")).items())
    if per_host:
        text += f"  hosts:\n    {per_host}\n"
    (d / "site.yaml").write_text(text)
    return d.parent


@contextlib.contextmanager
def cpu_quota(state_dir: Path, node: str, percent: int, tag: str = "topobind") -> Iterator[None]:
    """NODE's slurmd (its pid file in the cluster's ``state_dir``), so every job it starts,
    in a cgroup ``TAG-NODE`` of PERCENT of one CPU; every process is moved back and the
    cgroup removed on exit."""
    pid = (state_dir / f"slurmd-{node}.pid").read_text().strip()
    # The smallest quota the kernel takes (1 ms) in a period that gives the share: a kernel
    # that reports its best iteration is slowed only by iterations longer than an unthrottled
    # stretch (the quota and up to a tick more: THROTTLED_STREAM's are over 10 ms).
    quota, period = 1000, 1000 * 100 // percent
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").exists():
        cg, root = v1 / f"{tag}-{node}", v1
        cg.mkdir(exist_ok=True)
        (cg / "cpu.cfs_period_us").write_text(str(period))
        (cg / "cpu.cfs_quota_us").write_text(str(quota))
    else:
        root = Path("/sys/fs/cgroup")
        cg = root / f"{tag}-{node}"
        cg.mkdir(exist_ok=True)
        (cg / "cpu.max").write_text(f"{quota} {period}")
    (cg / "cgroup.procs").write_text(pid)
    try:
        yield
    finally:
        for p in (cg / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # gone meanwhile
                (root / "cgroup.procs").write_text(p)
        cg.rmdir()
