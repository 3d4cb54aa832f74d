"""The memory placement applied and verified for real: rankexec's version-3 fields
(set_mempolicy, THP off, the hugepage shim), topobind run --pages 2M|1G --verify-running on a
program topobind did not write, and the numa_maps verdicts (a rank whose pages moved away)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, RANKEXEC, TOPOBIND, run_topobind
from cli_helpers import run_rankexec as rankexec
from paths import KERNELS_BIN, RANKSTEP_BIN
from plans import plan_of
from slurm_helpers import slurm_cluster  # noqa: F401  (session fixture)

from topobind.launch.samples import Sample, parse_sample
from topobind.launch.verify_memory import MAX_OUTSIDE, check, summary, table
from topobind.plan.memory import plan_memory
from topobind.topo.topology import load

#: a dynamic program topobind did not write: 300 MiB touched, then alive for the sample
PYTHON_300M = ["python3", "-c", "b = b'x' * (300 << 20)\nimport time\ntime.sleep(3)"]

pytestmark = pytest.mark.skipif(not RANKEXEC.exists(), reason="run 'make kernels' first")


def step(tmp_path: Path, line: str, header: str = "topobind-rankexec 3") -> Path:
    path = tmp_path / "rankexec.txt"
    path.write_text(f"{header}\n@*\n0\t{line}\n")
    path.chmod(0o600)
    return path


@pytest.mark.slow
def test_rankexec_sets_policy_thp_and_preload(tmp_path: Path) -> None:
    lib = str(RANKSTEP_BIN / "libtbhugepages.so")  # %preload= must name a regular file
    path = step(tmp_path, f"%mem=bind:0\t%thp=off\t%preload={lib}\tA=1")
    out = rankexec(
        path,
        "sh",
        "-c",
        'echo "$LD_PRELOAD|$A"; grep THP_enabled /proc/self/status; cat /proc/self/numa_maps',
        LD_PRELOAD="",
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"{lib}|1"
    assert lines[1].split() == ["THP_enabled:", "0"]
    assert all(ln.split()[1] == "bind:0" for ln in lines[2:]) and len(lines) > 3
    inter = rankexec(step(tmp_path, "%mem=interleave:0"), "cat", "/proc/self/numa_maps")
    assert {ln.split()[1] for ln in inter.stdout.splitlines()} == {"interleave:0"}
    # the user's own LD_PRELOAD stays, after the shim
    kept = rankexec(step(tmp_path, f"%preload={lib}"), "sh", "-c", 'echo "$LD_PRELOAD"',
                    LD_PRELOAD="/u/mine.so")  # fmt: skip
    assert kept.stdout.strip() == f"{lib}:/u/mine.so"


@pytest.mark.slow
def test_rankexec_refuses_bad_memory_fields(tmp_path: Path) -> None:
    node = max(int(n[4:]) for n in os.listdir("/sys/devices/system/node") if n[4:].isdigit())
    bad = rankexec(step(tmp_path, f"%mem=bind:{node + 1}"), "true")
    assert bad.returncode == 125
    assert "local rank 0: cannot set the memory policy" in bad.stderr
    for field in ("%mem=sideways:0", "%mem=bind:", "%thp=maybe"):
        out = rankexec(step(tmp_path, field), "true")
        assert out.returncode == 125 and "topobind rankexec: error" in out.stderr, field
    old = rankexec(step(tmp_path, "%mem=bind:0", header="topobind-rankexec 4"), "true")
    assert old.returncode == 125 and "not a topobind-rankexec 1, 2 or 3 file" in old.stderr


@pytest.mark.slow
def test_dry_run_step_file_carries_memory(tmp_path: Path) -> None:
    out = run_topobind(
        "run", "--dry-run", "--launcher", "none", "--ranks", "1", "--threads", "1",
        "--pages", "4k", "--", "true",
        env=NO_SLURM, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "topobind-rankexec 3" in out.stdout
    assert "0\t%thp=off\t" in out.stdout


def sample(rank: int, nodes: dict[str, int], pages: dict[str, int], **extra: object) -> Sample:
    """A rank's sample line as rankexec's sampler writes it, through the samples' reader."""
    memory = {"nodes": nodes, "pages": pages, **extra}
    doc = {"kernel": "whereami", "host": "h", "rank": rank, "placement": [], "memory": memory}
    parsed = parse_sample(json.dumps(doc))
    assert parsed is not None and parsed.memory == memory
    return parsed


def test_verdicts_on_samples() -> None:
    topo = load("synthetic:pack:2 numa:1 l3:1 core:2 pu:1")
    plan = plan_memory(plan_of(topo, "per-numa"), "bind", "2M")
    big = 512 << 20
    good = sample(0, {"0": big}, {"2048": big}, large=[{"kib": 2048, "bytes": big}])
    # rank 1 ran under numactl --membind=0: its pages are on node 0, not 1
    moved = sample(1, {"0": big, "1": 1 << 20}, {"2048": big}, large=[{"kib": 2048, "bytes": big}])
    rows = check(plan, [good, moved])
    assert [r.status for r in rows] == ["OK", "MISMATCH"]
    assert "outside planned NUMA 1" in rows[1].why
    assert "differs from the plan" in summary(rows)
    # a little outside is tolerated, more is not
    edge = int(big * MAX_OUTSIDE * 0.9)
    fine = sample(1, {"1": big, "0": edge}, {"2048": big}, large=[{"kib": 2048, "bytes": big}])
    assert [r.status for r in check(plan, [good, fine])] == ["OK", "OK"]
    # a large mapping on 4 KiB pages when 2M was planned; a rank never sampled
    small = sample(0, {"0": big}, {"4": big}, large=[{"kib": 4, "bytes": big}])
    rows = check(plan, [small])
    assert rows[0].status == "MISMATCH" and "on 4k pages, --pages 2M planned" in rows[0].why
    assert rows[1].status == "MISSING"
    assert "MISSING" in table(rows)


def run_program(pages: str, kib: int, count: int) -> subprocess.CompletedProcess[str]:
    from topobind.measure.hugepages import hugepages_status, reserve_hugepages

    pool = hugepages_status().get(kib)
    in_use = pool.nr - pool.free + pool.resv if pool else 0  # another process's pages stay
    with reserve_hugepages(kib, count + in_use):
        return run_topobind(
            "run", "--ranks", "2", "--threads", "1", "--pages", pages,
            "--verify-running", "--sample-ms", "1500", "--", *PYTHON_300M,
            env=NO_SLURM, timeout=300,
        )  # fmt: skip


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="reserving hugepages needs root")
@pytest.mark.parametrize(("pages", "kib", "count"), [("2M", 2048, 400), ("1G", 1 << 20, 2)])
def test_run_puts_a_users_large_mappings_on_those_pages(pages: str, kib: int, count: int) -> None:
    try:
        done = run_program(pages, kib, count)
    except Exception as exc:  # noqa: BLE001 (the kernel could not give the pages)
        if "gave" in str(exc):
            pytest.skip(str(exc))
        raise
    assert done.returncode == 0, done.stderr
    rows = [ln for ln in done.stderr.splitlines() if ln.lstrip().startswith(("0 ", "1 "))]
    memory_rows = [ln for ln in rows if f"bind 0 {pages}" in ln]
    assert len(memory_rows) == 2, done.stderr
    for ln in memory_rows:
        assert f"{pages} " in ln.split("bind 0", 1)[1] and ln.rstrip().endswith("OK")
    assert "the memory of all 2 ranks is on its planned NUMA nodes and pages" in done.stderr
    assert "kernel.numa_balancing" in done.stderr


SHORT = re.compile(r"NUMA node 0 has (\d+) free 2M pages, the plan needs 32 there")


def _run_with_free_pages(free: int, *argv: str) -> subprocess.CompletedProcess[str]:
    """``topobind run --pages 2M`` with ``free`` 2 MiB pages free (the pages other processes
    hold stay theirs). The pool is the machine's: another process may take pages, or set the
    pool, between the test's setting and topobind's reading. The run's own answer says so (a
    shortfall where ``free`` sufficed, a launch where none was free): set it again then."""
    from topobind.measure.hugepages import hugepages_status, reserve_hugepages

    for _ in range(5):
        pool = hugepages_status().get(2048)
        if pool is None:
            pytest.skip("no 2 MiB hugepage pool on this kernel")
        in_use = pool.nr - pool.free + pool.resv  # held or promised to others
        with reserve_hugepages(2048, in_use + free):
            out = run_topobind("run", "--launcher", "none", "--ranks", "1", "--pages", "2M",
                               *argv, env=NO_SLURM, timeout=120)  # fmt: skip
        changed = SHORT.search(out.stderr) if free >= 32 else out.returncode == 0
        if not changed:
            return out
    pytest.fail(f"the 2 MiB pool changed under each of 5 runs; the last: {out.stderr}")


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="reserving hugepages needs root")
def test_a_static_program_or_a_missing_pool_is_refused(tmp_path: Path) -> None:
    """Issue 47 item 4: the pool is set from its state now, and the run repeated when another
    process changed it meanwhile (a test of another checkout on this machine took 5 of the 32
    pages here); the numbers the refusal names are read from the refusal itself."""
    out = _run_with_free_pages(32, "--threads", "1", "--", str(RANKEXEC))
    assert out.returncode == 2, out.stderr
    assert "is a static executable; the hugepage shim (LD_PRELOAD) cannot reach it" in out.stderr
    out = _run_with_free_pages(0, "--", "true")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    # issue 31 item 9: what the run needs (the shim maps allocations of 64 MiB or more)
    assert "needs 32 there (64 MiB per rank, the smallest allocation the hugepage shim maps" in (
        out.stderr
    )
    # whatever others hold: the fix asks for what node 0 lacks of the 32 over its pool now
    m = re.search(SHORT.pattern + r".*; as root: echo (\d+) > /sys/devices/system/node/node0/"
                  r"hugepages/hugepages-2048kB/nr_hugepages$", out.stderr.strip())  # fmt: skip
    assert m and int(m[1]) < 32 and int(m[2]) >= 32 - int(m[1]), out.stderr


@pytest.mark.slow
def test_probe_reports_its_policy_and_test_page(tmp_path: Path) -> None:
    from topobind.launch.verify_memory import probe_rows, probe_table

    whereami = KERNELS_BIN / "whereami"
    out = rankexec(step(tmp_path, "%mem=bind:0\tOMP_NUM_THREADS=1"), str(whereami))
    assert out.returncode == 0, out.stderr
    plan = plan_memory(plan_of(load("live"), "compact", ranks=1, threads=1), "bind")
    rows = probe_rows(plan, out.stdout, judge=True)
    assert [(r.policy, r.nodes, r.page_node, r.status) for r in rows] == [("bind", (0,), 0, "OK")]
    # the same probe against a plan that wanted interleave: caught
    other = plan_memory(plan_of(load("live"), "compact", ranks=1, threads=1), "interleave")
    bad = probe_rows(other, out.stdout, judge=True)
    assert bad[0].status == "MISMATCH" and "policy bind 0, planned interleave 0" in bad[0].why
    # without the step: the kernel's default, reported but not judged
    plain = subprocess.run([str(whereami)], capture_output=True, text=True, env=NO_SLURM)
    rows = probe_rows(plan, plain.stdout, judge=False)
    assert rows[0].policy == "default" and rows[0].status == "REPORTED"
    # issue 31 item 9: the reason it is not judged (it said REPORTED and nothing else)
    single = len(plan.topology.numa_nodes) + len(plan.topology.cpuless_numa) == 1
    why = "one NUMA node, where every policy places memory alike" if single else "applies no"
    assert f"REPORTED: not judged: {why}" in probe_table(rows) or not single
    assert rows[0].why.startswith("not judged: ")


@pytest.mark.slow
@pytest.mark.root
def test_srun_path_applies_the_memory_fields(slurm_cluster, tmp_path: Path) -> None:  # noqa: F811
    """Under srun (the local Slurm cluster) every rank goes through the step: --pages 4k turns
    transparent huge pages off in each rank, and the step file says version 3."""
    from slurm_helpers import sbatch_wait

    body = (
        f"export TOPOBIND_WORKDIR={tmp_path}\n"
        f"{TOPOBIND} run --launcher srun --ranks 2 --threads 1 --pages 4k -- "
        "sh -c 'echo rank=$SLURM_PROCID $(grep THP_enabled /proc/self/status)'\n"
        f"{TOPOBIND} run --dry-run --launcher srun --ranks 2 --threads 1 --pages 4k -- true "
        "| grep -c '%thp=off'\n"
    )
    script = tmp_path / "mem.sbatch"
    script.write_text(f"#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --time=2\n{body}")
    job = sbatch_wait(script, cluster=slurm_cluster, workdir=tmp_path)
    assert job.ok, job.describe()
    for rank in (0, 1):
        assert f"rank={rank} THP_enabled: 0" in job.output, job.describe()
    assert "\n2\n" in "\n" + job.output, job.describe()


@pytest.mark.slow
def test_the_mpi_probe_reports_every_ranks_memory(topobind_cli, tmp_path: Path) -> None:
    """whereami-mpi gathers every rank's policy and test page to rank 0 (params.rank_memory):
    the memory table has a row per rank, not rank 0's alone."""
    probe = KERNELS_BIN / "whereami-mpi"
    if not probe.exists():
        pytest.skip("kernels/bin/whereami-mpi is not built (no mpicc)")
    args = ["run", "--layout", "compact", "--ranks", "2", "--mpi", "openmpi4", "--verify"]
    out = topobind_cli(*args, "--", str(probe), "--spin-ms", "1", cwd=tmp_path, env=NO_SLURM)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    rows = [ln.split() for ln in lines if " REPORTED" in ln or ln.endswith(" OK")]
    assert [r[0] for r in rows] == ["0", "1"], out.stderr
    doc = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("{")))
    assert [m["rank"] for m in doc["params"]["rank_memory"]] == [0, 1]


@pytest.mark.parametrize(
    "entry",
    ['{"rank": "x"}', '{"rank": 1e400}', '{"rank": 0, "mempolicy_nodes": "ab"}',
     '{"rank": 0, "test_page_node": [1]}'],
)  # fmt: skip
def test_an_unreadable_probe_memory_report_is_a_mismatch(entry: str) -> None:
    """A broken probe's rank_memory entry: a MISMATCH row when judged, no traceback."""
    from topobind.launch.verify_memory import probe_rows, probe_table

    plan = plan_memory(plan_of(load("synthetic:pack:1 core:2 pu:1"), "compact", ranks=1), "bind")
    line = f'{{"params": {{"mempolicy": "bind", "rank_memory": [{entry}]}}}}'
    (row,) = probe_rows(plan, line, judge=True)
    assert row.status == "MISMATCH" and "not readable" in row.why
    assert "MISMATCH" in probe_table([row])
    (row,) = probe_rows(plan, line, judge=False)
    assert row.status == "REPORTED"
