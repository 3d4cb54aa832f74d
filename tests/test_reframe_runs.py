"""Real ReFrame runs on this machine: calibrate the local site, validate it (local scheduler and
the project's local Slurm), and watch wrong references, forged results, wrong binding and a
hugepage shortfall fail with the reason and a non-zero exit.

Small sizes (ReFrame variables -S) keep each session to seconds. Everything is written into
a temporary copy of the local site and a temporary results directory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from topobind import sites, stats
from topobind.kernels import hugepages_status

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TOPOBIND = str(REPO / ".venv" / "bin" / "topobind")
SMALL = [
    "-S", "elements=8M", "-S", "trials=10", "-S", "n=512", "-S", "reps=10",
    "-S", "sizes=16K,1M", "-S", "quick_n=960", "-S", "samples=3",
]  # fmt: skip
NR_1G = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"


@dataclass(frozen=True)
class Calibrated:
    sites: Path  # a sites directory holding the calibrated 'local' site
    results: Path
    output: str


def run(
    *args: str, sites_dir: Path, env: dict[str, str] | None = None, timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    full = dict(env if env is not None else os.environ)
    full["TOPOBIND_SITES_DIR"] = str(sites_dir)
    return subprocess.run(
        [TOPOBIND, *args], capture_output=True, text=True, env=full, timeout=timeout
    )


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Calibrated]:
    if not (REPO / "kernels" / "bin" / "stream").exists():
        pytest.fail("kernels not built: make kernels")
    base = tmp_path_factory.mktemp("rfm")
    shutil.copytree(REPO / "site_configs" / "local", base / "sites" / "local")
    (base / "sites" / "local" / "references.yaml").unlink(missing_ok=True)
    results = base / "results"
    done = run(
        # wide tolerances: this 2-core machine is shared, and a neighbour can halve a figure
        "calibrate", "--site", "local", "--repeat", "2", "--min-tolerance", "1.0",
        "--results", str(results), *SMALL, sites_dir=base / "sites",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    yield Calibrated(base / "sites", results, done.stdout)


def copy_sites(cal: Calibrated, tmp_path: Path) -> Path:
    dst = tmp_path / "sites"
    shutil.copytree(cal.sites, dst)
    return dst


def validate(cal: Calibrated, *args: str, sites_dir: Path | None = None, env=None):
    return run(
        "validate", "--site", "local", "--results", str(cal.results), *args,
        sites_dir=sites_dir or cal.sites, env=env,
    )  # fmt: skip


def table_rows(out: str) -> list[list[str]]:
    """The rows of validate's table, split on runs of 2+ spaces."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("check "))
    rows = []
    for ln in lines[start + 2 :]:
        if not ln.strip():
            break
        rows.append(re.split(r"\s{2,}", ln.strip()))
    return rows


def test_calibration_writes_medians_with_provenance(calibrated: Calibrated) -> None:
    site = sites.load_site("local", calibrated.sites)
    assert site.calibration is not None and site.calibration.runs == 2
    assert site.calibration.host == socket.gethostname()
    assert site.calibration.settings["elements"] == "8M"
    triad = site.targets[("stream", "compact", "triad")]
    assert triad.provenance.kind == "measured" and triad.provenance.method == "calibration"
    assert triad.provenance.runs == 2 and triad.unit == "MB/s"
    assert (triad.lower, triad.upper) == (-0.9, 1.0)  # --min-tolerance 1.0, lower capped
    # the reference is the median of the two sessions' values in ReFrame's own report
    report = max((calibrated.results / "reports").glob("calibrate-*.json"))
    values = [
        tc["perfvalues"]["local:default:triad"][0]
        for run_ in json.loads(report.read_text())["runs"]
        for tc in run_["testcases"]
        if tc["name"] == "StreamCheck %layout=compact"
    ]
    assert len(values) == 2
    assert triad.reference == pytest.approx(stats.median(values), rel=1e-6)
    # the node was recorded from the NodeCheck's topobind show
    from topobind.topology import load

    live = load("live").summary()
    assert site.node is not None and site.node.cores == live["cores"]
    assert site.node.numa_nodes == len(live["numa_nodes"])
    # every figure of the quick set got a target; DGEMM variability as 0 .. reference
    assert {("dgemm", "1G", m) for m in ("gflops", "max_slowdown", "cv")} <= set(site.targets)
    assert site.targets[("dgemm", "1G", "max_slowdown")].lower == -1.0
    assert "wrote " in calibrated.output and "stream.compact.triad" in calibrated.output


def test_quick_set_passes_on_local_scheduler(calibrated: Calibrated) -> None:
    # This 2-core machine is shared: a figure disturbed by a neighbour is measured again
    # (reframe --max-retries); a real regression fails every attempt.
    done = validate(calibrated, "--retries", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = table_rows(done.stdout)
    by_key = {(r[0], r[1], r[2]): r for r in rows}
    triad = by_key[("StreamCheck", "compact", "triad")]
    assert triad[3].endswith("MB/s") and triad[4].endswith("MB/s") and triad[-1] == "PASS"
    for case in ("compact", "every-other-core", "spread/2", "per-l3"):
        assert by_key[("BindingCheck", case, "sanity")][-1] == "PASS"
    assert by_key[("NodeCheck", "-", "sanity")][-1] == "PASS"
    assert by_key[("DgemmCheck", "1G", "gflops")][-1] == "PASS"
    assert by_key[("HplCheck", "quick", "gflops")][-1] == "PASS"
    assert re.search(r"\n\d+ passed, 0 failed, \d+ skipped\n", done.stdout)
    # perflogs and the results database are kept
    assert list((calibrated.results / "perflogs" / "local" / "default").glob("*.log"))
    assert (calibrated.results / "results.db").stat().st_size > 0


def test_impossible_reference_fails(calibrated: Calibrated, tmp_path: Path) -> None:
    sites_dir = copy_sites(calibrated, tmp_path)
    path = sites_dir / "local" / "references.yaml"
    doc = yaml.safe_load(path.read_text())
    measured = doc["targets"]["stream"]["compact"]["triad"]["reference"]
    doc["targets"]["stream"]["compact"]["triad"]["reference"] = 10 * measured
    doc["targets"]["stream"]["compact"]["triad"]["tolerance"] = {"lower": -0.1, "upper": 0.1}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = validate(calibrated, "-n", "StreamCheck%layout=compact", sites_dir=sites_dir)
    assert done.returncode == 1, done.stdout + done.stderr
    row = next(r for r in table_rows(done.stdout) if r[:3] == ["StreamCheck", "compact", "triad"])
    assert row[-1] == "FAIL"
    assert re.search(
        r"FAIL StreamCheck compact triad: [\d,.]+ MB/s is outside [\d,.]+", done.stdout
    )
    assert "1 failed" in done.stdout


def _forged_kernels(tmp_path: Path) -> Path:
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    real = REPO / "kernels" / "bin"
    for f in real.iterdir():
        (kdir / f.name).symlink_to(f)
    (kdir / "stream").unlink()
    (kdir / "stream").write_text(
        "#!/bin/bash\n# the real STREAM, then its result forged as failing validation\n"
        f'{real}/stream "$@" || exit $?\n'
        f"{REPO}/.venv/bin/python - <<'PY'\n"
        "import glob, json\n"
        "for f in glob.glob('stream.*.json'):\n"
        "    d = json.load(open(f))\n"
        "    d['valid'] = False\n"
        "    d['validation'] = 'Failed Validation on array c[] (forged)'\n"
        "    json.dump(d, open(f, 'w'))\n"
        "PY\n"
        "exit 4\n"
    )
    (kdir / "whereami").unlink()
    # the probe runs on the last CPU whatever OMP_PLACES says: thread 0 is off its place
    last = max(usable_cpus())
    (kdir / "whereami").write_text(f'#!/bin/bash\nexec taskset -c {last} {real}/whereami "$@"\n')
    (kdir / "stream").chmod(0o755)
    (kdir / "whereami").chmod(0o755)
    return kdir


def usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def test_forged_result_and_wrong_binding_fail_sanity(
    calibrated: Calibrated, tmp_path: Path
) -> None:
    if len(usable_cpus()) < 2:
        pytest.skip("needs two CPUs to force a wrong binding")
    env = dict(os.environ, TOPOBIND_KERNELS_DIR=str(_forged_kernels(tmp_path)))
    done = validate(
        calibrated, "-n", "StreamCheck%layout=compact", "-n", "BindingCheck%case=compact", env=env
    )
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {(r[0], r[1], r[2]): r[-1] for r in table_rows(done.stdout)}
    assert rows[("StreamCheck", "compact", "sanity")] == "FAIL"
    assert rows[("BindingCheck", "compact", "sanity")] == "FAIL"
    assert (
        "FAIL StreamCheck compact sanity: sanity error: STREAM validation failed on rank 0: "
        "Failed Validation on array c[] (forged)" in done.stdout
    )
    assert re.search(
        r"FAIL BindingCheck compact sanity: .*threads not on their planned CPUs \(OS indexes\): "
        r"rank 0 thread 0: planned \[0\], ran on \d+ \(MISMATCH\)",
        done.stdout,
    )


def test_hugepage_shortfall_names_the_exact_command(calibrated: Calibrated) -> None:
    status = hugepages_status().get(1048576)
    if status is None:
        pytest.skip("no 1 GiB hugepage pool on this kernel")
    need = max(n.free for n in status.nodes.values()) + 1
    done = validate(
        calibrated, "-n", "HugepagesCheck", "-S", f"HugepagesCheck.pages_1g_per_numa={need}"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    m = re.search(r"as root run: echo (\d+) > (\S+) ", done.stdout)
    assert m, done.stdout
    total = status.nr + sum(need - n.free for n in status.nodes.values())
    assert (int(m.group(1)), m.group(2)) == (total, NR_1G)
    if os.geteuid() != 0 or len(status.nodes) != 1:
        return
    # run the printed command: the check passes, then the pool is put back
    before = Path(NR_1G).read_text().strip()
    try:
        subprocess.run(["sh", "-c", f"echo {m.group(1)} > {NR_1G}"], check=True)
        if int(Path(NR_1G).read_text()) < total:
            pytest.skip("the kernel could not find contiguous 1 GiB pages")
        again = validate(
            calibrated, "-n", "HugepagesCheck", "-S", f"HugepagesCheck.pages_1g_per_numa={need}"
        )
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        Path(NR_1G).write_text(before + "\n")


def test_compare_with_previous_runs(calibrated: Calibrated) -> None:
    done = validate(calibrated, "-n", "StreamCheck%layout=compact", "--compare")
    assert done.returncode in (0, 1), done.stderr
    assert "--performance-compare" in done.stdout
    header = next(ln for ln in done.stdout.splitlines() if ln.startswith("name "))
    assert "(this run)" in header and "(previous 30d)" in header and "pdiff (%)" in header
    assert re.search(r"StreamCheck %layout=compact\s+triad\s+MB/s\s+[\d.]+\s+[\d.]+", done.stdout)


def test_quick_set_through_local_slurm(calibrated: Calibrated, local_slurm: dict[str, str]) -> None:
    done = validate(
        calibrated,
        "--partition", "slurm", "-n", "BindingCheck", "-n", "NodeCheck",
        "-n", "StreamCheck%layout=compact", "-n", "StreamCheck%layout=per-l3",
        env=local_slurm,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "site local, partition slurm" in done.stdout
    rows = {(r[0], r[1], r[2]): r for r in table_rows(done.stdout)}
    assert rows[("BindingCheck", "spread/2", "sanity")][-1] == "PASS"
    assert rows[("StreamCheck", "compact", "triad")][-1] == "PASS"
    # the job really went through sbatch and srun
    report = max((calibrated.results / "reports").glob("validate-local-slurm-*.json"))
    cases = json.loads(report.read_text())["runs"][0]["testcases"]
    binding = next(tc for tc in cases if tc["name"] == "BindingCheck %case=spread/2")
    assert binding["scheduler"] == "squeue" and binding["jobid"]
    script = Path(binding["outputdir"], "rfm_job.sh").read_text()
    assert "#SBATCH --exclusive" in script and "--launcher srun" in script
