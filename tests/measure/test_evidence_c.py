"""libtb's evidence (libtb/src/tb_evidence.c, tb_counters.c) through ``tb-evidence`` and the
kernels: fake /proc and /sys trees (TOPOBIND_PROCFS_ROOT, TOPOBIND_SYSFS_ROOT) whose files the
wrapped program changes between begin and end (the deltas), cgroup v1 and v2 layouts, a quota
at an ancestor, bad files (a FIFO, a huge file, text, missing), perf_event_open refused, and a
real STREAM run on this machine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from gpu_stand_ins import build_stand_in
from paths import KERNELS_BIN, RANKSTEP_BIN

from topobind.measure.evidence import read_evidence
from topobind.measure.results import validate_result_document

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("built_kernels")]

TB_EVIDENCE = RANKSTEP_BIN / "tb-evidence"
CPUS = sorted(os.sched_getaffinity(0))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _stat(busy: int, steal: int) -> str:
    lines = ["cpu  1 2 3 4 5 6 7 8 0 0"]
    lines += [f"cpu{c} {busy} 0 {busy} 1000 0 0 0 {steal} 0 0" for c in CPUS]
    return "\n".join(lines) + "\nintr 0\nctxt 0\n"


def _interrupts(count: int) -> str:
    head = "      " + "".join(f"  CPU{c:<6}" for c in CPUS)
    return f"{head}\n  0: " + " ".join(str(count) for _ in CPUS) + "  IO-APIC  timer\nERR: 0\n"


def _node_files(proc: Path, sys: Path, n: int) -> None:
    """The files the run changes: N is the step (0 begin, 1 end)."""
    _write(proc / "stat", _stat(100 + 100 * n, 5 + 10 * n))
    _write(
        proc / "vmstat",
        f"compact_stall {1 + n}\nthp_fault_fallback {2 + 2 * n}\npswpin 3\npswpout {4 + n}\n",
    )
    _write(proc / "interrupts", _interrupts(1000 + 7 * n))
    numastat = (
        f"numa_hit 10\nnuma_miss {1 + 5 * n}\nnuma_foreign 0\nlocal_node 9\nother_node {2 + n}\n"
    )
    _write(sys / "devices/system/node/node0/numastat", numastat)
    for c in CPUS:
        cpu = sys / f"devices/system/cpu/cpu{c}"
        _write(cpu / "thermal_throttle/core_throttle_count", f"{1 + n}\n")
        _write(cpu / "thermal_throttle/package_throttle_count", "0\n")
    _write(sys / "class/powercap/intel-rapl:0/energy_uj", f"{1000000 + 2000000 * n}\n")


def fake_tree(root: Path, cgroup: str = "v2") -> dict[str, str]:
    """A node: NUMA node 0 with the run's CPUs and node 1 without, a GPU at x8 of x16, cpufreq,
    powercap; the cgroup layout ``v2`` (quota at the parent) or ``v1`` (cpu,cpuacct). Beside it,
    ``end/`` holds the files as they are at the end. Returns the environment."""
    proc, sys = root / "proc", root / "sys"
    for n, (p, s) in enumerate(((proc, sys), (root / "end/proc", root / "end/sys"))):
        _node_files(p, s, n)
        if cgroup == "v2":
            step = s / "fs/cgroup/job/step"
            _write(
                step / "cpu.stat",
                f"usage_usec 5\nnr_periods 9\nnr_throttled {2 + 3 * n}\n"
                f"throttled_usec {1000 + 4000 * n}\n",
            )
        else:
            step = s / "fs/cgroup/cpu,cpuacct/slurm/job_1/step_0"
            _write(
                step / "cpu.stat",
                f"nr_periods 4\nnr_throttled {1 + 2 * n}\nthrottled_time {2000000 + 3000000 * n}\n",
            )
    if cgroup == "v2":
        _write(proc / "self/cgroup", "0::/job/step\n")
        _write(sys / "fs/cgroup/cgroup.controllers", "cpu memory\n")
        _write(sys / "fs/cgroup/job/cpu.max", "25000 100000\n")
        _write(sys / "fs/cgroup/job/step/cpu.max", "max 100000\n")
    else:
        _write(proc / "self/cgroup", "5:memory:/slurm\n4:cpu,cpuacct:/slurm/job_1/step_0\n")
        v1 = sys / "fs/cgroup/cpu,cpuacct/slurm"
        _write(v1 / "cpu.cfs_quota_us", "50000\n")
        _write(v1 / "cpu.cfs_period_us", "100000\n")
        _write(v1 / "job_1/cpu.cfs_quota_us", "-1\n")
        _write(v1 / "job_1/cpu.cfs_period_us", "100000\n")
    _write(proc / "self/numa_maps", "7f00 default anon=10 N0=6 N1=4 kernelpagesize_kB=4\n")
    _write(proc / "sys/kernel/perf_event_paranoid", "2\n")
    _write(sys / "devices/system/node/node0/cpulist", ",".join(map(str, CPUS)) + "\n")
    _write(sys / "devices/system/node/node1/cpulist", "\n")
    _write(sys / "devices/system/node/node1/numastat", "numa_miss 0\nother_node 0\n")
    for c in CPUS:
        _write(sys / f"devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq", "2900000\n")
        _write(sys / f"devices/system/cpu/cpu{c}/cpufreq/cpuinfo_max_freq", "3500000\n")
    _write(sys / "class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850\n")
    gpu = sys / "bus/pci/devices/0000:3b:00.0"
    for name, value in (("class", "0x030200"), ("vendor", "0x10de"),
                        ("current_link_speed", "16.0 GT/s PCIe"),
                        ("current_link_width", "8"), ("max_link_speed", "16.0 GT/s PCIe"),
                        ("max_link_width", "16")):  # fmt: skip
        _write(gpu / name, value + "\n")
    return {**os.environ, "TOPOBIND_PROCFS_ROOT": str(proc), "TOPOBIND_SYSFS_ROOT": str(sys)}


def run_wrapped(root: Path, env: dict[str, str], *extra: str) -> dict:
    """tb-evidence around a program that turns the tree into its end state."""
    out = root / "evidence.json"
    change = f"cp -R {root}/end/proc/. {root}/proc/ && cp -R {root}/end/sys/. {root}/sys/"
    cmd = [str(TB_EVIDENCE), *extra, "--json", str(out), "--", "sh", "-c", change]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_throttled_time_summed_over_cpus_is_at_most_the_whole_run(tmp_path: Path) -> None:
    """The kernel adds up the throttled time of the cgroup's run queues over the CPUs: on the
    local cluster a run read 'throttled 105% of the run'. The share is at most 1."""
    env = fake_tree(tmp_path, "v2")
    stat = "usage_usec 5\nnr_periods 9\nnr_throttled 9\nthrottled_usec 1000000001000\n"
    _write(tmp_path / "end/sys/fs/cgroup/job/step/cpu.stat", stat)  # 11 days throttled
    ev = read_evidence(run_wrapped(tmp_path, env)).evidence
    assert ev is not None and ev.signal("throttled_share") == 1.0


def test_deltas_quota_at_an_ancestor_and_links_from_a_cgroup_v2_tree(tmp_path: Path) -> None:
    doc = run_wrapped(tmp_path, fake_tree(tmp_path, "v2"))
    assert doc["schema"] == "topobind.evidence/1" and doc["status"] == 0
    ev = read_evidence(doc).evidence
    assert ev is not None and ev.cpus == tuple(CPUS)
    assert ev.signal("quota_cpus") == 0.25  # the parent's cpu.max; the step's is "max"
    assert ev.signal("throttled_periods") == 3
    assert ev.signal("throttled_share") > 0
    assert ev.signal("busy_share") == 1.0  # 2 s of busy jiffies a CPU in a short window
    assert 0 < ev.signal("steal_share") <= 1
    assert ev.signal("numa_miss") == 5 and ev.signal("numa_other_node") == 1
    assert ev.signal("compact_stall") == 1 and ev.signal("thp_fault_fallback") == 2
    assert ev.signal("swap_pages") == 1
    assert ev.signal("interrupts_on_cpus") == 7 * len(CPUS)
    assert ev.signal("thermal_throttle_events") == len(CPUS)
    assert ev.signal("package_energy_j") == 2.0
    assert ev.signal("clock_mhz") == 2900.0 and ev.signal("clock_max_mhz") == 3500.0
    assert "exited" in ev.reason("remote_page_share")  # around a child: its numa_maps is gone
    [link] = ev.links
    assert (link.device, link.kind, link.width, link.max_width) == ("0000:3b:00.0", "gpu", 8, 16)
    assert link.degraded


def test_a_cgroup_v1_layout_with_the_quota_two_levels_up(tmp_path: Path) -> None:
    ev = read_evidence(run_wrapped(tmp_path, fake_tree(tmp_path, "v1"))).evidence
    assert ev is not None
    assert ev.signal("quota_cpus") == 0.5  # slurm's; job_1's is -1 (unlimited)
    assert ev.signal("throttled_periods") == 2
    assert ev.signal("throttled_share") > 0


def test_remote_pages_read_from_numa_maps_in_the_process_itself(tmp_path: Path) -> None:
    env = fake_tree(tmp_path)
    out = tmp_path / "loop.json"
    proc = subprocess.run([str(TB_EVIDENCE), "--loop", "1", "--json", str(out)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "1 runs" in proc.stderr and "ms per run" in proc.stderr
    ev = read_evidence(json.loads(out.read_text())).evidence
    assert ev is not None and ev.signal("remote_page_share") == pytest.approx(0.4)  # N1=4 of 10


def test_bad_files_move_their_signal_to_unavailable_and_nothing_hangs(tmp_path: Path) -> None:
    env = fake_tree(tmp_path)
    proc_root, sys_root = Path(env["TOPOBIND_PROCFS_ROOT"]), Path(env["TOPOBIND_SYSFS_ROOT"])
    (proc_root / "stat").unlink()
    os.mkfifo(proc_root / "stat")  # a reader that blocked on it would hang here
    with open(proc_root / "interrupts", "wb") as f:
        f.truncate(9 << 20)  # above the 8 MiB bound
    for c in CPUS:
        (sys_root / f"devices/system/cpu/cpu{c}/thermal_throttle/core_throttle_count").write_text(
            "abc\n"
        )
        (sys_root / f"devices/system/cpu/cpu{c}/thermal_throttle/package_throttle_count").unlink()
    for name in ("energy_uj", "max_energy_range_uj"):
        (sys_root / "class/powercap/intel-rapl:0" / name).unlink()
    (sys_root / "class/powercap/intel-rapl:0").rmdir()
    (sys_root / "class/powercap").rmdir()
    out = tmp_path / "bad.json"
    proc = subprocess.run([str(TB_EVIDENCE), "--json", str(out), "--", "true"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    ev = read_evidence(json.loads(out.read_text())).evidence
    assert ev is not None
    assert "a FIFO, not a regular file" in ev.reason("busy_share")
    assert "a FIFO" in ev.reason("steal_share")
    assert "larger than 8388608 bytes" in ev.reason("interrupts_on_cpus")
    assert "not a number" in ev.reason("thermal_throttle_events")
    assert "powercap not readable" in ev.reason("package_energy_j")
    assert ev.signal("quota_cpus") == 0.25  # the rest is still read


def test_refused_perf_event_open_says_why_and_changes_nothing_else(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "TOPOBIND_EVIDENCE_PERF": "refuse"}
    cmd = [str(KERNELS_BIN / "stream"), "--elements", "200k", "--trials", "3"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    validate_result_document(doc, "stream")
    assert doc["valid"] and doc["headline"]["value"] > 0
    ev = read_evidence(doc).evidence
    assert ev is not None and not ev.counters_available
    assert "EACCES" in ev.why and "perf_event_paranoid=" in ev.why
    assert ev.counters.events == {}
    assert "migrations" in ev.unavailable and "cpu-migrations" in ev.unavailable["migrations"]
    assert ev.signal("ctx_switches") is not None  # getrusage, not a counter


def test_a_real_stream_run_says_which_counters_this_node_offers() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    cmd = [str(KERNELS_BIN / "stream"), "--elements", "200k", "--trials", "3"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    validate_result_document(doc, "stream")
    ev = read_evidence(doc).evidence
    assert ev is not None and ev.window_s > 0 and set(ev.cpus) == set(CPUS)
    assert ev.counters_available  # the software events count everywhere perf_event_open works
    assert {"context_switches", "cpu_migrations", "page_faults"} <= set(ev.counters.events)
    if not ev.hardware_counters:  # a VM without a PMU (this one): it says why
        assert ev.why and "cycles" in ev.counters.missing
    for name in ("busy_share", "steal_share", "ctx_switches", "minor_faults"):
        assert ev.signal(name) is not None, ev.reason(name)


def test_evidence_off_writes_no_section() -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOPOBIND_EVIDENCE": "0"}
    cmd = [str(KERNELS_BIN / "stream"), "--elements", "100k", "--trials", "2"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "evidence" not in json.loads(proc.stdout)


def test_the_wrapper_passes_the_programs_status_on(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    proc = subprocess.run([str(TB_EVIDENCE), "--json", str(out), "--", "sh", "-c", "exit 3"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 3
    assert json.loads(out.read_text())["status"] == 3
    proc = subprocess.run([str(TB_EVIDENCE), "--", str(tmp_path / "absent")],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 127 and "cannot run" in proc.stderr


def _quota_cgroup(tmp_path: Path) -> Path:
    """A new cgroup v1 cpu group with a quota of 5 % of a CPU, or the test skipped."""
    base = Path("/sys/fs/cgroup/cpu")
    if os.geteuid() != 0 or not (base / "cpu.cfs_quota_us").is_file():
        pytest.skip("needs root and cgroup v1's cpu controller at /sys/fs/cgroup/cpu")
    group = base / f"topobind-test-{os.getpid()}-{tmp_path.name}"
    try:
        group.mkdir()
        (group / "cpu.cfs_period_us").write_text("100000\n")
        (group / "cpu.cfs_quota_us").write_text("5000\n")
    except OSError as exc:
        if group.exists():
            group.rmdir()
        pytest.skip(f"cannot make a cgroup with a quota: {exc}")
    return group


def test_a_real_cgroup_quota_is_named_and_its_throttling_counted(tmp_path: Path) -> None:
    """A busy loop that needs 0.1 s of CPU under a quota of 5 ms every 100 ms is throttled in
    every period it runs, however busy the machine."""
    group = _quota_cgroup(tmp_path)
    out = tmp_path / "quota.json"
    loop = "import time\nwhile time.process_time() < 0.1: pass\n"
    script = (
        f'echo $$ > {group}/cgroup.procs && exec {TB_EVIDENCE} --json {out} -- python3 -c "{loop}"'
    )
    try:
        proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=120,
                              check=False)  # fmt: skip
    finally:
        group.rmdir()
    assert proc.returncode == 0, proc.stderr
    ev = read_evidence(json.loads(out.read_text())).evidence
    assert ev is not None
    assert ev.signal("quota_cpus") == 0.05
    assert ev.signal("throttled_periods") >= 10
    assert ev.signal("throttled_share") > 0.5  # throttled 95 ms of every 100


def _pmu(sys: Path, name: str, type_: int, events: dict[str, str], cpumask: str = "") -> None:
    pmu = sys / "bus/event_source/devices" / name
    _write(pmu / "type", f"{type_}\n")
    _write(pmu / "format/event", "config:0-7\n")
    _write(pmu / "format/umask", "config:8-15\n")
    for event, spec in events.items():
        _write(pmu / "events" / event, spec + "\n")
    if cpumask:
        _write(pmu / "cpumask", cpumask + "\n")


def test_sysfs_events_and_the_memory_controllers_are_tried_and_their_failure_said(
    tmp_path: Path,
) -> None:
    """A core PMU with l2_lines_in and an uncore_imc PMU in sysfs, of types the kernel has no
    PMU for: both are parsed and opened, and each failure is said; a format that is no bit
    range is said too."""
    env = fake_tree(tmp_path)
    sys_root = Path(env["TOPOBIND_SYSFS_ROOT"])
    _pmu(sys_root, "cpu", 987654, {"l2_lines_in": "event=0x25,umask=0x1f"})
    _pmu(sys_root, "uncore_imc_0", 987655,
         {"cas_count_read": "event=0x04,umask=0x03", "cas_count_write": "event=0x04,umask=0x0c"},
         cpumask=str(CPUS[0]))  # fmt: skip
    out = tmp_path / "pmu.json"
    cmd = [str(TB_EVIDENCE), "--json", str(out), "--", "true"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    ev = read_evidence(json.loads(out.read_text())).evidence
    assert ev is not None and ev.counters.pmu == "cpu"
    assert "l2_lines_in" not in ev.counters.events
    assert ev.reason("l2_lines_in").startswith("perf_event_open: ")
    assert ev.counters.dram_bytes is None
    assert f"uncore_imc_0 on CPU {CPUS[0]}: perf_event_open: " in ev.reason("dram_bytes")
    (sys_root / "bus/event_source/devices/cpu/format/umask").write_text("garbage\n")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    ev = read_evidence(json.loads(out.read_text())).evidence
    assert "term umask of cpu has no config format in sysfs" in ev.reason("l2_lines_in")


def test_a_node_with_no_signal_at_all_still_runs_and_says_why_for_each(tmp_path: Path) -> None:
    """Empty /proc and /sys trees but for a cgroup file of a layout not seen before: every
    signal that needs them is unavailable with its reason; the program's status is kept."""
    proc_root, sys_root = tmp_path / "proc", tmp_path / "sys"
    _write(proc_root / "self/cgroup", "1:name=elogind:/\n3:freezer:/job\n")
    sys_root.mkdir()
    env = {
        **os.environ,
        "TOPOBIND_PROCFS_ROOT": str(proc_root),
        "TOPOBIND_SYSFS_ROOT": str(sys_root),
    }
    out = tmp_path / "none.json"
    cmd = [str(TB_EVIDENCE), "--json", str(out), "--", "sh", "-c", "exit 5"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 5, proc.stderr
    ev = read_evidence(json.loads(out.read_text())).evidence
    assert ev is not None
    for name in ("busy_share", "steal_share", "interrupts_on_cpus", "numa_miss", "swap_pages",
                 "thermal_throttle_events", "clock_mhz", "package_energy_j"):  # fmt: skip
        assert name not in ev.signals and "absent" in ev.reason(name), name
    assert "names no cpu cgroup" in ev.reason("throttled_share")
    assert ev.signal("ctx_switches") is not None  # the child's rusage needs no file
    assert ev.links == ()


def _throttle_run(tmp_path: Path, **extra: str) -> tuple[object, subprocess.CompletedProcess[str]]:
    env = fake_tree(tmp_path)
    lib = build_stand_in(tmp_path / "lib", "libnvidia-ml.so.1")
    env |= {"LD_LIBRARY_PATH": str(lib), "TB_FAKE_NVML_GPUS": "00000000:3B:00.0=GPU-a;"
            "00000000:86:00.0=GPU-b", **extra}  # fmt: skip
    out = tmp_path / "gpu.json"
    cmd = [str(TB_EVIDENCE), "--json", str(out), "--", "true"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    return read_evidence(json.loads(out.read_text())).evidence, proc


def test_the_gpus_throttle_reasons_from_nvml_around_a_program(tmp_path: Path) -> None:
    ev, _ = _throttle_run(tmp_path, TB_FAKE_NVML_THROTTLE="0x48,0x1")
    assert ev is not None
    assert ev.gpu_throttle == ((0, ("hw_slowdown", "hw_thermal_slowdown")), (1, ("gpu_idle",)))
    assert "gpu_throttle" not in ev.unavailable


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ({"TB_FAKE_NVML_HANG": "nvmlInit_v2", "TOPOBIND_GPU_LIBS_TIMEOUT": "1"},
         "NVML did not answer in 1 s"),
        ({"TB_FAKE_NVML_CRASH": "nvmlDeviceGetCount_v2"}, "NVML crashed (signal 11)"),
        ({"TB_FAKE_NVML_FAIL": "nvmlInit_v2=9"}, "nvmlInit_v2 returned 9"),
    ],
)  # fmt: skip
def test_an_nvml_that_hangs_crashes_or_fails_is_a_reason(
    tmp_path: Path, fault: dict[str, str], reason: str
) -> None:
    ev, _ = _throttle_run(tmp_path, **fault)
    assert ev is not None and ev.gpu_throttle == ()
    assert reason in ev.unavailable["gpu_throttle"]
    assert ev.links and ev.signal("quota_cpus") == 0.25  # the rest is read as before


def test_latencys_evidence_is_of_its_pinned_cpu_and_its_sweeps_pages(tmp_path: Path) -> None:
    """latency --cpu C: the evidence's CPUs are C (pinned before the evidence begins, so
    remote_page_share compares its pages with C's NUMA node, not the whole mask's), and it
    ends while the sweep's region is still mapped (read from numa_maps: a number, not a
    reason). Both failed before: cpus was the whole mask, and the region was freed first."""
    cpu = max(os.sched_getaffinity(0))
    out = tmp_path / "lat.json"
    cmd = [str(KERNELS_BIN / "latency"), "--cpu", str(cpu), "--sizes", "4M", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    ev = read_evidence(json.loads(out.read_text())).evidence
    assert ev is not None
    assert ev.document["cpus"] == [cpu]
    assert ev.signal("remote_page_share") is not None, ev.reason("remote_page_share")
