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
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from cli_helpers import run_topobind, venv_bin
from paths import REPO

from topobind.measure import stats
from topobind.measure.hugepages import hugepages_status
from topobind.validation import calibration, sites
from topobind.validation.load import BUSY_SHARE

pytestmark = pytest.mark.slow

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
    return run_topobind(*args, env=full, timeout=timeout)


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
    """The rows of validate's table, split on runs of 2+ spaces (without the node column a
    Slurm partition's table starts with)."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(("check ", "node ")))
    skip = 1 if lines[start].startswith("node ") else 0
    rows = []
    for ln in lines[start + 2 :]:
        if not ln.strip():
            break
        rows.append(re.split(r"\s{2,}", ln.strip())[skip:])
    return rows


def test_calibration_writes_medians_with_provenance(calibrated: Calibrated) -> None:
    site = sites.load_site("local", calibrated.sites)
    assert site.calibration is not None and site.calibration.runs == 2
    assert site.calibration.host == socket.gethostname()
    assert site.calibration.settings["elements"] == "8M"
    # the load of the other processes meanwhile is recorded, whichever it was
    load = site.calibration.load
    assert load is not None and load["cpus"] >= len(usable_cpus())
    assert 0 <= load["others_cpus"] <= load["cpus"]
    assert load["busy"] == (load["others_cpus"] / load["cpus"] > BUSY_SHARE)
    busy = site.calibration.busy
    triad = site.targets[("stream", "compact", "triad")]
    assert triad.provenance.kind == "measured" and triad.provenance.method == "calibration"
    assert triad.provenance.runs == 2 and triad.unit == "MB/s"
    # --min-tolerance 1.0, lower capped; a busy node's rates get no upper bound
    assert (triad.lower, triad.upper) == (-0.9, None if busy else 1.0)
    assert ("busy node" in (triad.provenance.note or "")) == busy
    check = run("site", "check", "local", sites_dir=calibrated.sites)
    assert check.returncode == 0, check.stderr
    assert ("calibration: BUSY NODE: references calibrated on" in check.stdout) == busy
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
    from topobind.topo.topology import load as load_topology

    live = load_topology("live").summary()
    assert site.node is not None and site.node.cores == live["cores"]
    assert site.node.numa_nodes == len(live["numa_nodes"])
    # every figure of the quick set got a target; DGEMM variability (quiet node only) as
    # 0 .. reference
    assert ("dgemm", "1G", "gflops") in site.targets
    variability = {("dgemm", "1G", m) for m in ("max_slowdown", "cv", "frac_slower_5pct")}
    if busy:
        assert not variability & set(site.targets)
        assert "busy node" in calibrated.output and "not written" in calibrated.output
    else:
        assert variability <= set(site.targets)
        assert site.targets[("dgemm", "1G", "max_slowdown")].lower == -1.0
    assert "wrote " in calibrated.output and "stream.compact.triad" in calibrated.output


def test_every_written_reference_is_crossable(calibrated: Calibrated) -> None:
    site = sites.load_site("local", calibrated.sites)
    assert site.targets
    for (check, _variant, metric), t in site.targets.items():
        spec = sites.CHECKS[check].metrics[metric]
        assert calibration.crossable(spec, t.reference, t.lower, t.upper), t
        if spec.higher_is_better:  # a rate falling to a tenth of its reference fails
            assert t.lower is not None and t.reference * (1 + t.lower) > 0
        else:  # a latency or a variability figure ten times its reference fails
            assert t.upper is not None and t.reference * (1 + t.upper) < 10 * t.reference


def wide_bands(cal: Calibrated, tmp_path: Path) -> Path:
    """A copy of the calibrated site whose bands (made here) only fail a broken machinery:
    the figures of this shared machine move with its neighbours."""
    sites_dir = copy_sites(cal, tmp_path)
    path = sites_dir / "local" / "references.yaml"
    doc = yaml.safe_load(path.read_text())
    for check, variants in doc["targets"].items():
        for metrics in variants.values():
            for metric, t in metrics.items():
                spec = sites.CHECKS[check].metrics[metric]
                if spec.higher_is_better:
                    t["tolerance"] = {"lower": -0.999, "upper": None}
                else:
                    t["tolerance"] = {"lower": None, "upper": 1000.0}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return sites_dir


def test_quick_set_passes_on_local_scheduler(calibrated: Calibrated, tmp_path: Path) -> None:
    done = validate(calibrated, "--retries", "2", sites_dir=wide_bands(calibrated, tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = table_rows(done.stdout)
    by_key = {(r[0], r[1], r[2]): r for r in rows}
    triad = by_key[("StreamCheck", "compact", "triad")]
    assert triad[3].endswith("MB/s") and "MB/s" in triad[4] and triad[-1] == "PASS"
    for case in ("compact", "every-other-core", "spread/2", "per-l3"):
        assert by_key[("BindingCheck", case, "sanity")][-1] == "PASS"
    assert by_key[("NodeCheck", "-", "sanity")][-1] == "PASS"
    assert by_key[("DgemmCheck", "1G", "gflops")][-1] == "PASS"
    assert by_key[("HplCheck", "quick", "gflops")][-1] == "PASS"
    assert by_key[("LatencyCheck", "local", "latency_ns")][-1] == "PASS"
    assert re.search(r"\n\d+ passed, 0 failed, \d+ skipped\n", done.stdout)
    # validate says next to each calibrated figure whether the node was busy then
    site = sites.load_site("local", calibrated.sites)
    assert site.calibration is not None
    assert triad[4].endswith("(busy)") == site.calibration.busy
    assert ("(busy): the reference was calibrated on" in done.stdout) == site.calibration.busy
    # perflogs and the results database are kept
    assert list((calibrated.results / "perflogs" / "local" / "default").glob("*.log"))
    assert (calibrated.results / "results.db").stat().st_size > 0


def test_site_without_targets_runs_every_check_alike(tmp_path: Path) -> None:
    sites_dir = tmp_path / "sites"
    shutil.copytree(REPO / "site_configs" / "local", sites_dir / "local")
    (sites_dir / "local" / "references.yaml").unlink(missing_ok=True)
    done = run(
        "validate", "--site", "local", "--results", str(tmp_path / "results"),
        "-n", "LatencyCheck", "-n", "DgemmCheck%pages=1G", "-n", "C2CCheck%pair=same-l3", *SMALL,
        sites_dir=sites_dir,
    )  # fmt: skip
    # issue 47 item 5: figures measured, none compared: performance not judged, exit 4
    assert done.returncode == 4, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"performance NOT JUDGED: none of the \d+ figure\(s\) had a reference; "
        r"write references with: topobind calibrate --site local",
        last,
    ), last
    assert "has no targets yet" in done.stderr
    rows = {(r[0], r[1], r[2]): r for r in table_rows(done.stdout)}
    for key in [
        ("LatencyCheck", "local", "latency_ns"),
        ("DgemmCheck", "1G", "gflops"),
        ("DgemmCheck", "1G", "max_slowdown"),
    ]:
        assert rows[key][-1] == "PASS (no ref)" and rows[key][4] == "-", rows[key]
    c2c = rows.get(("C2CCheck", "same-l3", "c2c_ns")) or rows[("C2CCheck", "same-l3", "-")]
    # a node without an L3 domain of two cores skips it for that reason, not for lack of targets
    assert c2c[-1] == "PASS (no ref)" or "two cores" in done.stdout, c2c


def test_impossible_reference_fails(calibrated: Calibrated, tmp_path: Path) -> None:
    # every other figure gets a wide band: a busy neighbour must not fail a third one
    sites_dir = wide_bands(calibrated, tmp_path)
    path = sites_dir / "local" / "references.yaml"
    doc = yaml.safe_load(path.read_text())
    measured = doc["targets"]["stream"]["compact"]["triad"]["reference"]
    # 1000x: calibrated under a burst of load and validated on a quiet node measured 3x its
    # reference here (load average 34); no load swing reaches 200x
    doc["targets"]["stream"]["compact"]["triad"]["reference"] = 1000 * measured
    doc["targets"]["stream"]["compact"]["triad"]["tolerance"] = {"lower": -0.1, "upper": 0.1}
    # and a variability limit no DGEMM run meets: the slowest of 10 repetitions within
    # 0.0001 % of their median
    doc["targets"]["dgemm"]["1G"]["max_slowdown"] = {
        "reference": 0.0001, "tolerance": {"lower": -1.0, "upper": 0.0}, "unit": "%",
        "provenance": {"kind": "quoted", "source": "this test"},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    prom = tmp_path / "topobind.prom"
    done = validate(
        calibrated, "-n", "StreamCheck%layout=compact", "-n", "DgemmCheck%pages=1G",
        "--metrics", str(prom), sites_dir=sites_dir,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    # plain validate's metrics: this node slow on one run (weak), the figure against its
    # reference (ratio about 1/1000)
    text = prom.read_text()
    node = f'node="{socket.gethostname()}"'
    verdicts = [ln for ln in text.splitlines() if ln.startswith("topobind_node_verdict{")]
    assert (
        f'topobind_node_verdict{{site="local",partition="default",{node},verdict="slow"}} 1.0'
        in verdicts
    ), text
    assert f'topobind_node_verdict_strong{{site="local",partition="default",{node}}} 0.0' in text
    ratio = [ln for ln in text.splitlines() if ln.startswith("topobind_check_ratio{")
             and 'metric="triad"' in ln]  # fmt: skip
    # at most 1/5: measured against 1000x what was measured (a busy node measures less: no floor)
    assert len(ratio) == 1 and 0 < float(ratio[0].split()[-1]) < 0.2, text
    rows = {(r[0], r[1], r[2]): r for r in table_rows(done.stdout)}
    failed = {key for key, r in rows.items() if r[-1] == "FAIL"}
    assert failed == {
        ("StreamCheck", "compact", "triad"), ("DgemmCheck", "1G", "max_slowdown")
    }, done.stdout  # fmt: skip
    assert re.search(
        r"FAIL StreamCheck compact triad: [\d,.]+ MB/s is outside [\d,.]+", done.stdout
    )
    assert re.search(r"FAIL DgemmCheck 1G max_slowdown: [\d.]+ % is outside 0 \.\. ", done.stdout)
    assert "2 failed" in done.stdout


def _forged_kernels(tmp_path: Path) -> Path:
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    real = REPO / "kernels" / "bin"
    for f in [*real.iterdir(), *(REPO / "rankstep" / "bin").iterdir()]:  # an installation's bin/
        (kdir / f.name).symlink_to(f)
    (kdir / "stream").unlink()
    (kdir / "stream").write_text(
        "#!/bin/bash\n# the real STREAM, then its result forged as failing validation\n"
        f'{real}/stream "$@" || exit $?\n'
        f"{sys.executable} - <<'PY'\n"
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
        # the check passes; its free_1g_min has no reference in this calibration, so the
        # run ends NOT JUDGED (4) rather than 0 (issue 47 item 5)
        assert again.returncode in (0, 4), again.stdout + again.stderr
        assert "1 passed, 0 failed" in again.stdout, again.stdout
    finally:
        Path(NR_1G).write_text(before + "\n")


def test_compare_with_previous_runs(calibrated: Calibrated) -> None:
    done = validate(calibrated, "-n", "StreamCheck%layout=compact", "--compare")
    assert done.returncode in (0, 1), done.stderr
    assert "--performance-compare" in done.stdout
    header = next(ln for ln in done.stdout.splitlines() if ln.startswith("name "))
    assert "(this run)" in header and "(previous 30d)" in header and "pdiff (%)" in header
    assert re.search(r"StreamCheck %layout=compact\s+triad\s+MB/s\s+[\d.]+\s+[\d.]+", done.stdout)


def test_quick_set_through_local_slurm(
    calibrated: Calibrated, local_slurm: dict[str, str], tmp_path: Path
) -> None:
    done = validate(
        calibrated,
        "--partition", "slurm", "-n", "BindingCheck", "-n", "NodeCheck",
        "-n", "StreamCheck%layout=compact", "-n", "StreamCheck%layout=per-l3",
        "-n", "HplCheck%size=quick",
        env=local_slurm, sites_dir=wide_bands(calibrated, tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "site local, partition slurm" in done.stdout
    assert re.search(r"^node1\s+BindingCheck", done.stdout, re.M), done.stdout  # where it ran
    rows = {(r[0], r[1], r[2]): r for r in table_rows(done.stdout)}
    assert rows[("BindingCheck", "spread/2", "sanity")][-1] == "PASS"
    assert rows[("StreamCheck", "compact", "triad")][-1] == "PASS"
    assert rows[("HplCheck", "quick", "gflops")][-1] == "PASS"
    # the job really went through sbatch and srun
    report = max((calibrated.results / "reports").glob("validate-local-slurm-*.json"))
    cases = json.loads(report.read_text())["runs"][0]["testcases"]
    binding = next(tc for tc in cases if tc["name"] == "BindingCheck %case=spread/2")
    assert binding["scheduler"] == "squeue" and binding["jobid"]
    script = Path(binding["outputdir"], "rfm_job.sh").read_text()
    assert "#SBATCH --exclusive" in script and "--launcher srun" in script
    # HPL asked Slurm for the ranks mpirun starts: one task per core of the node
    hpl = next(tc for tc in cases if tc["name"] == "HplCheck %size=quick")
    script = Path(hpl["outputdir"], "rfm_job.sh").read_text()
    assert f"#SBATCH --ntasks={live_cores()}" in script, script


def live_cores() -> int:
    from topobind.topo.topology import load

    return len(load("live").cores)


# --------------------------------------------------------------------------- a cluster's config
FOREIGN_CONFIG = """\
site_configuration = {{
    "systems": [{{
        "name": "mycluster",
        "descr": "a cluster's own ReFrame configuration",
        "hostnames": [".*"],
        "modules_system": "nomod",
        "partitions": [{partition}],
    }}],
    "environments": [
        {{"name": "gnu", "cc": "gcc", "cxx": "g++", "ftn": "gfortran"}},
        {{"name": "nocc", "cc": "/nonexistent/cc"}},
    ],
}}
"""
CPU_PARTITION = (
    '{"name": "cpu", "scheduler": "local", "launcher": "local", "environs": ["nocc", "gnu"]}'
)
SLURM_PARTITION = (
    '{"name": "batch", "scheduler": "squeue", "launcher": "srun", "access": ["-p debug"], '
    '"environs": ["gnu"], "time_limit": "10m"}'
)


def foreign_reframe(
    tmp_path: Path, partition: str, *args: str, site: str | None, sites_dir: Path,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """``reframe -C cluster.py -c reframe_tests ...`` from tmp_path, as a cluster's CI runs it."""
    config = tmp_path / "cluster.py"
    config.write_text(FOREIGN_CONFIG.format(partition=partition))
    full = dict(env if env is not None else os.environ)
    full.pop("TOPOBIND_SITE", None)
    full["TOPOBIND_SITES_DIR"] = str(sites_dir)
    if site is not None:
        full["TOPOBIND_SITE"] = site
    argv = [str(venv_bin("reframe")), "-C", str(config), "-c",
            str(REPO / "reframe_tests"), "--nocolor", *args, "-r"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, env=full, cwd=tmp_path, timeout=900)


def test_foreign_config_without_site_stops_with_one_message(tmp_path: Path) -> None:
    sites_dir = REPO / "site_configs"
    done = foreign_reframe(tmp_path, CPU_PARTITION, site=None, sites_dir=sites_dir)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "Ran 0/0" not in out and "PASSED" not in out
    errors = [ln for ln in out.splitlines() if ln.startswith("topobind: error:")]
    assert len(errors) == 1, out
    assert (
        "ReFrame system 'mycluster' is not a topobind site and TOPOBIND_SITE is not set"
        in (errors[0])
    )
    assert "local" in errors[0] and "betzy" in errors[0]  # the known sites
    done = foreign_reframe(tmp_path, CPU_PARTITION, site="nosuch", sites_dir=sites_dir)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "Ran 0/0" not in out, out
    assert "topobind: error: TOPOBIND_SITE=nosuch: no site 'nosuch'" in out


def test_foreign_config_runs_checks_with_the_site_targets(
    calibrated: Calibrated, tmp_path: Path
) -> None:
    sites_dir = wide_bands(calibrated, tmp_path)
    path = sites_dir / "local" / "references.yaml"
    doc = yaml.safe_load(path.read_text())
    triad = doc["targets"]["stream"]["compact"]["triad"]
    triad["reference"], triad["tolerance"] = 10 * triad["reference"], {"lower": -0.1, "upper": 0.1}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    # no -S: the settings the references were calibrated with (SMALL) apply by themselves
    done = foreign_reframe(
        tmp_path, CPU_PARTITION, "-n", "BindingCheck%case=compact",
        "-n", "StreamCheck%layout=compact", site="local", sites_dir=sites_dir,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 1, out  # the impossible STREAM reference of site local
    assert re.search(r"\[\s*OK\s*\] .*BindingCheck %case=compact .*@mycluster:cpu\+gnu", out)
    assert re.search(r"\[\s*FAIL\s*\] .*StreamCheck %layout=compact .*@mycluster:cpu\+gnu", out)
    assert "failed to meet reference(s): triad=" in out
    # the environment that cannot compile C with OpenMP is skipped with the reason
    assert re.search(
        r"\[\s*SKIP\s*\] .*StreamCheck .*@mycluster:cpu\+nocc \[environment nocc does not "
        r"compile C with OpenMP \('/nonexistent/cc .*-fopenmp .*' failed: .*\); the checks run "
        r"in gnu\]",
        out,
    ), out
    assert re.search(r"Ran 2/4 test case\(s\) .*1 failure.* 2 skipped", out), out
    job = next((tmp_path / "stage" / "mycluster" / "cpu" / "gnu").glob("StreamCheck*"))
    assert "--elements 8M" in (job / "rfm_job.sh").read_text()


def test_foreign_config_through_local_slurm(
    calibrated: Calibrated, local_slurm: dict[str, str], tmp_path: Path
) -> None:
    done = foreign_reframe(
        tmp_path, SLURM_PARTITION, "-n", "BindingCheck%case=spread/2", "-n", "HplCheck%size=quick",
        *SMALL, site="local", sites_dir=wide_bands(calibrated, tmp_path), env=local_slurm,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert re.search(r"Ran 2/2 test case\(s\) .*0 failure", out), out
    stage = tmp_path / "output" / "mycluster" / "batch" / "gnu"
    hpl = (next(stage.glob("HplCheck*")) / "rfm_job.sh").read_text()
    assert f"#SBATCH --ntasks={live_cores()}" in hpl and "#SBATCH --exclusive" in hpl, hpl
    binding = (next(stage.glob("BindingCheck*")) / "rfm_job.sh").read_text()
    assert "--launcher srun" in binding
    assert re.search(r"P: gflops: [\d.]+ GFLOP/s \(r:[\d.]+", out), out  # site local's target


def test_judge_sanity_shows_figures_and_load_without_failing(
    calibrated: Calibrated, tmp_path: Path
) -> None:
    """make demo's validation: a figure outside its reference is shown (OUTSIDE, with the
    reason) with the machine's load, and fails nothing; the same figure fails a plain
    validate (test_impossible_reference_fails)."""
    sites_dir = wide_bands(calibrated, tmp_path)
    path = sites_dir / "local" / "references.yaml"
    doc = yaml.safe_load(path.read_text())
    triad = doc["targets"]["stream"]["compact"]["triad"]
    triad["reference"] = 10 * triad["reference"]
    triad["tolerance"] = {"lower": -0.1, "upper": 0.1}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = validate(
        calibrated, "-n", "StreamCheck%layout=compact", "--judge", "sanity", sites_dir=sites_dir
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {(r[0], r[1], r[2]): r[-1] for r in table_rows(done.stdout)}
    assert rows[("StreamCheck", "compact", "triad")] == "OUTSIDE", done.stdout
    assert re.search(
        r"^outside StreamCheck compact triad: [\d,.]+ MB/s is outside [\d,.]+ .* \(not judged\)$",
        done.stdout,
        re.M,
    )
    assert re.search(r"^load: other processes kept [\d.]+ of \d+ CPUs busy", done.stdout, re.M)
    assert "0 failed" in done.stdout and "1 outside their reference (not judged" in done.stdout


def test_judge_sanity_still_fails_on_sanity(calibrated: Calibrated, tmp_path: Path) -> None:
    if len(usable_cpus()) < 2:
        pytest.skip("needs two CPUs to force a wrong binding")
    env = dict(os.environ, TOPOBIND_KERNELS_DIR=str(_forged_kernels(tmp_path)))
    done = validate(
        calibrated, "-n", "StreamCheck%layout=compact", "-n", "BindingCheck%case=compact",
        "--judge", "sanity", env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {(r[0], r[1], r[2]): r[-1] for r in table_rows(done.stdout)}
    assert rows[("StreamCheck", "compact", "sanity")] == "FAIL"
    assert rows[("BindingCheck", "compact", "sanity")] == "FAIL"


def test_a_sanity_only_check_runs_once_with_sanity_once(tmp_path: Path) -> None:
    # validate --each-node's quick tier: HugepagesCheck in the first of 2 runs, skipped in the
    # rerun; a check with figures runs in both
    report = tmp_path / "report.json"
    env = dict(os.environ, TOPOBIND_SITE="local", TOPOBIND_REFRAME_RESULTS=str(tmp_path))
    done = subprocess.run(
        [venv_bin("reframe"), "-C", str(REPO / "site_configs" / "reframe_config.py"),
         "-c", str(REPO / "reframe_tests"), "--system", "local:default", "-t", "quick",
         "-n", "HugepagesCheck", "-n", "C2CCheck%pair=same-l3", "-S", "sanity_once=true",
         "--reruns", "1", "--report-file", str(report), "-r"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert report.exists(), done.stdout + done.stderr
    runs = json.loads(report.read_text())["runs"]
    got = [sorted((tc["name"], tc["result"]) for tc in run["testcases"]) for run in runs]
    if got[0] and got[0][0][1] == "skip":  # no same-l3 pair on this machine: Hugepages alone
        got = [[c for c in run if c[0] == "HugepagesCheck"] for run in got]
    assert got[0][-1] == ("HugepagesCheck", "pass"), done.stdout
    assert got[1][-1] == ("HugepagesCheck", "skip"), done.stdout
    assert all(r == "pass" for run in got for n, r in run if n == "C2CCheck"), got
