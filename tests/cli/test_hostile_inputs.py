"""The hostile inputs of issue 22 (items 5-10), each with the issue's exact input, through the
real ``topobind`` command: hostile Slurm variables and ``scontrol`` answers, corrupt
topologies, preset device variables, hostile probe output and result files.

Each refusal must be one ``topobind: error:`` line naming the input, a non-zero exit and no
traceback, within a hang detector's time (the subprocess timeout)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NO_SLURM, run_topobind
from paths import REPO, TOPOLOGIES

pytestmark = pytest.mark.slow

HANG = 30  # seconds: a hang detector only
SMALL_XML = TOPOLOGIES / "fakecpukinds.xml"


def topobind(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return run_topobind(*args, env={**NO_SLURM, **env}, cwd=cwd, timeout=HANG)


def refused(done: subprocess.CompletedProcess[str], *names: str) -> str:
    """The one error line of a refusal; it must name each of ``names``."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("topobind: error:")]
    assert len(errors) == 1, done.stderr
    for name in names:
        assert name in errors[0], errors[0]
    return errors[0]


# --------------------------------------------------------------------------- Slurm variables
IN_JOB = {"SLURM_JOB_ID": "1"}


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"SLURM_NTASKS": "²"}, ("SLURM_NTASKS", "'²'")),
        ({"SLURM_JOB_NUM_NODES": "²", "SLURM_NTASKS": "4"}, ("SLURM_JOB_NUM_NODES", "'²'")),
        ({"SLURM_NTASKS_PER_NODE": "2(x1000000000000)"}, ("2(x1000000000000)",)),
        ({"SLURM_NTASKS_PER_NODE": "2(x1000000000)"}, ("2(x1000000000)", "more than 1 node")),
        ({"SLURM_NTASKS_PER_NODE": "2(x0)"}, ("2(x0)",)),
        # item 10: two nodes' counts in a one-node job
        ({"SLURM_NTASKS_PER_NODE": "2(x2)"}, ("2(x2)", "more than 1 node")),
        ({"SLURM_NTASKS_PER_NODE": "2,2", "SLURM_JOB_NUM_NODES": "3"}, ("2,2", "3 nodes")),
        ({"SLURM_NTASKS": "4", "SLURM_JOB_NUM_NODES": "1000000000"}, ("SLURM_JOB_NUM_NODES",)),
    ],
    ids=lambda v: str(v),
)
def test_hostile_slurm_task_counts(env: dict[str, str], names: tuple[str, ...]) -> None:
    done = topobind("env", "-t", str(SMALL_XML), "-l", "compact", **IN_JOB, **env)
    refused(done, *names)


def test_the_task_counts_slurm_really_gives_still_plan() -> None:
    done = topobind(
        "env", "-t", str(SMALL_XML), "-l", "compact", **IN_JOB, SLURM_NTASKS_PER_NODE="1"
    )
    assert done.returncode == 0, done.stderr
    assert "allocation" not in done.stderr


def fake_scontrol(tmp_path: Path, cpu_ids: str) -> dict[str, str]:
    """A job of two nodes whose ``scontrol show job -d`` answers ``CPU_IDs=cpu_ids``: a
    fake scontrol first on PATH, since no real Slurm answers such text."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        'case "$2" in\n'
        "  hostnames) printf 'n1\\nn2\\n' ;;\n"
        f"  job) printf '   Nodes=n[1-2] CPU_IDs={cpu_ids} Mem=0 GRES=\\n' ;;\n"
        "  *) exit 1 ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_NTASKS_PER_NODE": "2",
    }


@pytest.mark.parametrize("cpu_ids", ["0-99999999", "0-1,abc", "-1", "3-1", "0-²"])
def test_hostile_scontrol_cpu_ids(cpu_ids: str, tmp_path: Path) -> None:
    done = topobind(
        "env", "-t", str(SMALL_XML), "-l", "compact", **fake_scontrol(tmp_path, cpu_ids)
    )
    refused(done, "CPU_IDs", repr(cpu_ids))


def test_verify_nodes_is_bounded() -> None:
    for nodes in ("1000000000", "1000000"):
        done = topobind(
            "verify", "-t", str(SMALL_XML), "-l", "compact", "--nodes", nodes, "--", "true"
        )
        refused(done, "--nodes", nodes)


# --------------------------------------------------------------------------- probe output
GOOD_ENTRY = {"rank": 0, "thread": 0, "cpu": 0, "affinity": [0], "host": "h"}


def probe_line(**change: object) -> str:
    entry = {**GOOD_ENTRY, **change}
    doc = {"kernel": "whereami", "host": "h", "rank": 0, "placement": [entry]}
    return json.dumps(doc)


PROBE_LINES = {
    "rank-x": (probe_line(rank="x"), '"rank"'),
    "no-rank": (probe_line().replace('"rank": 0, "thread"', '"thread"'), '"rank"'),
    "placement-5": ('{"kernel":"whereami","host":"h","placement":5}', '"placement"'),
    "placement-a": ('{"kernel":"whereami","host":"h","placement":["a"]}', "placement entry 0"),
    "nested": ('{"kernel":' + "[" * 100000 + "]" * 100000 + "}", "nested too deep"),
    "cpu-nan": (probe_line().replace('"cpu": 0', '"cpu": NaN'), '"cpu"'),
    "gpu-rank-zz": (
        json.dumps(
            {
                "kernel": "whereami",
                "host": "h",
                "rank": "zz",
                "params": {"device_env": {"CUDA_VISIBLE_DEVICES": "0"}},
                "placement": [GOOD_ENTRY],
            }
        ),
        '"rank"',
    ),
}


@pytest.mark.parametrize("case", list(PROBE_LINES))
def test_hostile_probe_output(case: str, tmp_path: Path) -> None:
    line, names = PROBE_LINES[case]
    (tmp_path / "probe.txt").write_text(line + "\n")
    gpu = case.startswith("gpu")
    topo = REPO / "tests" / "data" / "gpu-amd-drm.xml" if gpu else SMALL_XML
    layout = "per-gpu" if gpu else "compact"
    cat = ["sh", "-c", f"cat {tmp_path / 'probe.txt'}"]
    done = topobind("verify", "-t", str(topo), "-l", layout, "--ranks", "1", "--", *cat)
    refused(done, "probe output line 1", names)


# --------------------------------------------------------------------------- result files
@pytest.fixture(scope="module")
def stream_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    stream = REPO / "kernels" / "bin" / "stream"
    if not stream.exists():
        pytest.skip("run 'make kernels' first")
    out = subprocess.run(
        [str(stream), "--elements", "100k", "--trials", "3"],
        capture_output=True,
        text=True,
        env={**NO_SLURM, "OMP_NUM_THREADS": "1"},
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def _without(doc: dict[str, object], key: str) -> dict[str, object]:
    return {k: v for k, v in doc.items() if k != key}


def _all_nan(doc: dict[str, object]) -> dict[str, object]:
    copy = json.loads(json.dumps(doc))
    for metric in copy["metrics"].values():
        metric["trials"] = [float("nan")] * len(metric["trials"])
    return copy


@pytest.mark.parametrize(
    ("case", "names"),
    [
        ("nested", "nested too deep"),
        ("huge-headline", '"headline.value"'),
        ("no-metrics", '"metrics"'),
        ("nan-trials", "no trial is a finite number"),
    ],
)
def test_hostile_result_files(
    case: str, names: str, stream_result: dict[str, object], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "good.json").write_text(json.dumps(stream_result))
    bad = results / "bad.json"
    if case == "nested":
        bad.write_text("[" * 100000 + "]" * 100000)
    elif case == "huge-headline":
        head = {**stream_result["headline"], "value": 1.7e308}  # type: ignore[dict-item]
        bad.write_text(json.dumps({**stream_result, "headline": head}))
    elif case == "no-metrics":
        bad.write_text(json.dumps(_without(stream_result, "metrics")))
    else:
        bad.write_text(json.dumps(_all_nan(stream_result)))
    done = topobind("report", str(results), "-o", str(tmp_path / "out"))
    refused(done, str(bad), names)
    assert not (tmp_path / "out").exists()


def test_a_host_name_with_a_newline_stays_on_its_line(
    stream_result: dict[str, object], tmp_path: Path
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    for i, host in enumerate(["node1", "node2\nFAKE LINE", "node3"]):
        (results / f"{i}.json").write_text(json.dumps({**stream_result, "host": host}))
    done = topobind("report", str(results), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert "node2\\nFAKE LINE" in summary
    assert not any(line.startswith("FAKE LINE") for line in summary.splitlines())


# --------------------------------------------------------------------------- corrupt topologies
PASCAL = TOPOLOGIES / "gpu" / "mpibind-cts1-pascal.xml"  # 2 NVIDIA P100 (cuda0, cuda1)
TWO_NUMA = TOPOLOGIES / "24em64t-2n6c2t-pci.xml"
GPU0 = 'type="PCIDev" gp_index="235" pci_busid="0000:04:00.0"'
#: case -> (shipped XML, text in it, its replacement, what the error names)
CORRUPT = {
    "duplicate-pu": (
        SMALL_XML,
        'type="PU" os_index="2"',
        'type="PU" os_index="0"',
        "two PU objects have os_index=0",
    ),
    "duplicate-numa": (
        TWO_NUMA,
        'type="NUMANode" os_index="1"',
        'type="NUMANode" os_index="0"',
        "two NUMANode objects have os_index=0",
    ),
    "gpus-one-bus-id": (
        PASCAL,
        'type="PCIDev" gp_index="236" pci_busid="0000:07:00.0"',
        'type="PCIDev" gp_index="236" pci_busid="0000:04:00.0"',
        "pci_busid='0000:04:00.0'",
    ),
    "cuda1-renamed-cuda0": (PASCAL, 'name="cuda1"', 'name="cuda0"', "'cuda0'"),
    "cpukinds-overlap": (
        SMALL_XML,
        '<cpukind cpuset="0x00000004"',
        '<cpukind cpuset="0x00000006"',
        "cpukind objects overlap (PUs 1",
    ),
}


@pytest.mark.parametrize("case", list(CORRUPT))
@pytest.mark.parametrize("command", ["show", "plan"])
def test_corrupt_topologies_are_refused(case: str, command: str, tmp_path: Path) -> None:
    shipped, old, new, names = CORRUPT[case]
    text = shipped.read_text()
    assert text.count(old) == 1, old
    bad = tmp_path / f"{case}.xml"
    bad.write_text(text.replace(old, new))
    layout = ["-l", "per-gpu" if shipped == PASCAL else "per-numa"] if command == "plan" else []
    done = topobind(command, "-t", str(bad), *layout, cwd=tmp_path)
    if shipped == PASCAL and command == "show":  # GPUs that cannot be told apart: a note
        assert done.returncode == 0, done.stderr
        assert f"note: GPUs not listed: {bad}: " in done.stdout and names in done.stdout
        compact = topobind("plan", "-t", str(bad), "-l", "compact", cwd=tmp_path)
        assert compact.returncode == 0 and "GPUs not used by this layout" in compact.stdout
        return
    refused(done, str(bad), names)
    assert done.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [bad.name]


def test_a_gpu_outside_any_pci_device_is_left_out_with_a_note(tmp_path: Path) -> None:
    """Issue 27: an OS device with no PCI device of its vendor under its bridge is a note;
    the other GPU still plans."""
    bad = tmp_path / "gpu-without-pci.xml"
    bad.write_text(PASCAL.read_text().replace(GPU0, 'type="Bridge" gp_index="235"'))
    done = topobind("plan", "-t", str(bad), "-l", "per-gpu", "-f", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert [g["pci"] for r in plan["ranks"] for g in r["gpus"]] == ["0000:07:00.0"]
    assert any("OS device cuda0 is outside any PCI device" in n for n in plan["notes"])


def test_the_shipped_topologies_still_load() -> None:
    """The checks refuse only corrupt files: every shipped XML still loads."""
    for xml in [*TOPOLOGIES.glob("*.xml"), *TOPOLOGIES.glob("gpu/*.xml")]:
        done = topobind("show", "-t", str(xml))
        assert done.returncode == 0, (xml, done.stderr)


# --------------------------------------------------------------------------- preset devices
def test_a_preset_device_variable_is_named_with_a_topology_file() -> None:
    args = ("env", "-t", str(PASCAL), "-l", "per-gpu")
    done = topobind(*args, CUDA_VISIBLE_DEVICES="1")
    assert done.returncode == 0, done.stderr
    assert f"CUDA_VISIBLE_DEVICES=1 is already set, but the plan numbers the GPUs of {PASCAL}" in (
        done.stderr
    )
    assert "already set" not in topobind(*args).stderr
    # another vendor's variable is not the plan's: nothing replaces it
    assert "already set" not in topobind(*args, ROCR_VISIBLE_DEVICES="1").stderr


# --------------------------------------------------------------------------- the per-rank step
RANKEXEC = REPO / "rankstep" / "bin" / "rankexec"
needs_rankexec = pytest.mark.skipif(not RANKEXEC.exists(), reason="run 'make kernels' first")


def rankexec(step: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RANKEXEC), str(step), "--", "true"],
        capture_output=True,
        text=True,
        env=NO_SLURM,
        timeout=HANG,
    )


def step_error(done: subprocess.CompletedProcess[str], *names: str) -> None:
    assert done.returncode == 125, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("topobind rankexec: error:"), done.stderr
    for name in names:
        assert name in lines[0], lines[0]


@needs_rankexec
def test_rankexec_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "rankexec.txt"
    os.mkfifo(fifo, 0o600)
    step_error(rankexec(fifo), str(fifo), "not a regular file")


@needs_rankexec
@pytest.mark.skipif(99 in os.sched_getaffinity(0), reason="this machine holds CPU 99")
@pytest.mark.parametrize("cpus", ["0,99", "99", "0-99"])
def test_rankexec_refuses_cpus_it_cannot_bind(cpus: str, tmp_path: Path) -> None:
    step = tmp_path / "rankexec.txt"
    step.write_text(f"topobind-rankexec 2\n@*\n0\t%cpus={cpus}\tX=1\n")
    step.chmod(0o600)
    step_error(rankexec(step), f"CPUs {cpus}")


# --------------------------------------------------------------------------- node names
@needs_rankexec
def test_env_and_rankexec_take_the_same_group_for_a_qualified_node_name(tmp_path: Path) -> None:
    """SLURMD_NODENAME=node3.cluster.org: both take node3's group (the name up to the '.')."""
    from plans import plan_of

    from topobind.launch.node_groups import env_group
    from topobind.launch.shape import NodePlan
    from topobind.topo.topology import load

    node = load(str(TWO_NUMA))
    groups = [
        NodePlan(("node1", "node2"), plan_of(node, "compact", ranks=1, threads=1)),
        NodePlan(("node3",), plan_of(node, "compact", ranks=1, threads=2), first_rank=2),
    ]
    from topobind.topo.slurm_allocation import allocation

    env = {"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURMD_NODENAME": "node3.cluster.org"}
    assert env_group(groups, allocation(env).step_host) is groups[1]
    step = tmp_path / "rankexec.txt"
    step.write_text("topobind-rankexec 1\n@node1,node2\n0\tX=first\n@node3\n0\tX=node3\n")
    step.chmod(0o600)
    done = subprocess.run(
        [str(RANKEXEC), str(step), "--", "sh", "-c", 'echo "$X"'],
        capture_output=True,
        text=True,
        env={**NO_SLURM, "SLURMD_NODENAME": "node3.cluster.org"},
        timeout=HANG,
    )
    assert done.stdout.strip() == "node3", done.stderr


def test_a_sample_file_that_is_not_utf8_is_read_without_a_traceback(tmp_path: Path) -> None:
    """Found by tests/cli/test_fuzz_inputs.py: a sample of bytes that are not UTF-8."""
    from topobind.launch.samples import judged_threads, read_sample_files

    good = tmp_path / "sample-good.json"
    good.write_text(probe_line() + "\n")
    bad = tmp_path / "sample-bad.json"
    bad.write_bytes(b"\x80\xff")
    assert [o.cpu for o in judged_threads(read_sample_files([str(bad), str(good)]))] == [0]


def test_a_fifo_as_site_file_is_refused_without_blocking(tmp_path: Path) -> None:
    """Found by tests/cli/test_fuzz_inputs.py's neighbours: site.yaml read with a blocking open."""
    site = tmp_path / "sites" / "fifo"
    site.mkdir(parents=True)
    os.mkfifo(site / "site.yaml", 0o600)
    done = topobind("site", "check", "fifo", TOPOBIND_SITES_DIR=str(tmp_path / "sites"))
    refused(done, "site.yaml", "FIFO")


def test_yaml_aliases_that_expand_without_end_are_refused(tmp_path: Path) -> None:
    """'Billion laughs' in a site file: anchors of anchors, nine deep, once hung site check."""
    site = tmp_path / "sites" / "betzy"
    site.mkdir(parents=True)
    laughs = ["lol0: &l0 [x, x, x, x, x, x, x, x, x]"] + [
        f"lol{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)
    ]
    text = (REPO / "site_configs" / "betzy" / "site.yaml").read_text()
    node = '  description: "2x AMD EPYC 7742'
    assert text.count(node) == 1
    text = text.replace(node, '  description: *l9\n  x: "', 1)
    (site / "site.yaml").write_text("\n".join(laughs) + "\n" + text)
    done = topobind("site", "check", "betzy", TOPOBIND_SITES_DIR=str(tmp_path / "sites"))
    refused(done, "site.yaml", "aliases")


@needs_rankexec
def test_rankexec_errors_stay_on_one_line(tmp_path: Path) -> None:
    """Found by tests/cli/test_fuzz_commands.py: a malformed line holding a carriage return was
    quoted as it was, so the error took two lines. A control byte is now refused as such,
    before the line is parsed (issue 47 item 1), in one line naming its line and column."""
    step = tmp_path / "rankexec.txt"
    step.write_text("topobind-rankexec 1\nx\tA=\r0\n")
    step.chmod(0o600)
    step_error(rankexec(step), "line 2, column 5: control byte 0x0d (CR")


@pytest.mark.parametrize("metric", [["triad"], "nosuch"])
def test_a_headline_naming_no_metric_is_refused(
    metric: object, stream_result: dict[str, object]
) -> None:
    """Found by tests/cli/test_fuzz_inputs.py: a list as headline.metric (unhashable)."""
    from topobind.measure.results import ResultError, result_from_document

    head = {**stream_result["headline"], "metric": metric}  # type: ignore[dict-item]
    with pytest.raises(ResultError, match='"headline.metric"|the headline metric name'):
        result_from_document({**stream_result, "headline": head})


# --------------------------------------------------------------------------- issue 31 item 3
FLEET_SITE = (
    "schema: topobind.site/1\nname: fleet\ndescription: test fleet\nhostnames: ['^n$']\n"
    "partitions:\n  - {name: slurm, scheduler: slurm, launcher: srun, access: ['-p debug']}\n"
    "hugepages: {pages_1g_per_numa: 0}\n"
)


def _fleet_case(value: str, name: str = "StreamCheck %layout=compact %.nid=node1") -> str:
    return ('{"runs": [{"testcases": [{"display_name": "' + name + '", "system": "fleet", '
            '"result": "pass", "perfvalues": {"fleet:slurm:triad": [' + value +
            ', 0, null, null, "MB/s", "pass"]}}]}]}')  # fmt: skip


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (_fleet_case("NaN"), "NaN is not a JSON number"),
        (_fleet_case("Infinity"), "Infinity is not a JSON number"),
        (_fleet_case('"fast"'), 'perfvalues["fleet:slurm:triad"][0]: must be a number'),
        (_fleet_case("true"), "[0]: must be a number, got true"),
        (_fleet_case("0"), "[0]: a MB/s figure must be positive"),
        (_fleet_case("1e308"), "[0]: must be a finite number"),
        (_fleet_case("1", "StreamCheck %.nid=node1 %.nid=node2"), "%.nid given 2 times"),
        ('{"runs": [{"testcases": [1, 2]}]}', "runs[0].testcases[0]: must be a test case"),
    ],
)
def test_hostile_reframe_reports_are_one_line(text: str, field: str, tmp_path: Path) -> None:
    """Issue 31 item 3: validate --each-node --reports of a hostile ReFrame report."""
    site = tmp_path / "sites" / "fleet"
    site.mkdir(parents=True)
    (site / "site.yaml").write_text(FLEET_SITE)
    report = tmp_path / "report.json"
    report.write_text(text)
    done = topobind("validate", "--site", "fleet", "--partition", "slurm", "--each-node",
                    "--reports", str(report), TOPOBIND_SITES_DIR=str(site.parent))  # fmt: skip
    refused(done, str(report), field)


def test_garbage_in_the_results_database_is_one_line(tmp_path: Path) -> None:
    """Issue 31 item 3: validate --history over a results database holding a blob that is
    not JSON."""
    import sqlite3

    site = tmp_path / "sites" / "fleet"
    site.mkdir(parents=True)
    (site / "site.yaml").write_text(FLEET_SITE)
    con = sqlite3.connect(tmp_path / "results.db")
    con.execute("CREATE TABLE sessions(uuid TEXT PRIMARY KEY, session_start_unix REAL, "
                "session_end_unix REAL, json_blob TEXT, report_file TEXT)")  # fmt: skip
    con.execute("INSERT INTO sessions VALUES ('s1', 1.0, 2.0, '{not json', '')")
    con.commit()
    con.close()
    done = topobind("validate", "--site", "fleet", "--history", "--results", str(tmp_path),
                    TOPOBIND_SITES_DIR=str(site.parent))  # fmt: skip
    refused(done, "results.db: session s1", "not JSON")
