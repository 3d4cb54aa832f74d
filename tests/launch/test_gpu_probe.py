"""The placement probe's GPU runtime part (kernels/whereami.c, params.gpu_runtimes) and its
verdict (topobind.launch.verify_devices) against runtimes that fail (issue 37 items 3, 4, 5,
13, 23, 24): the stand-in CUDA driver (fake_libcuda.c) and HIP (fake_libamdhip64.c) play
hangs in each call, crashes, every class of error code, garbage and unterminated strings,
huge counts, a device that cannot be read, a library the loader refuses."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from topobind.launch.verify_devices import RUNTIME, Seen, check_env, runtime_row
from topobind.plan.model import PlannedRank

HERE = Path(__file__).parent
NV = ("0000:41:00.0", "0001:00:06.0")
UUIDS = ("GPU-11111111-2222-3333-4444-555555555555", "GPU-99999999-8888-7777-6666-555555555555")
AMD = ("0000:c1:00.0", "0000:c6:00.0")
CUDA_GPUS = f"{NV[0]}={UUIDS[0]}=1;{NV[1]}={UUIDS[1]}=2"


# ----------------------------------------------------------------- the verdict (fast)
def cuda(error: str | None = None, code: int | None = None, **more: object) -> Seen:
    return Seen({"api": "cuda", "error": error, "code": code, "devices": [], **more})


@pytest.mark.parametrize(
    ("code", "name"),
    [(46, "CUDA_ERROR_DEVICES_UNAVAILABLE"), (3, "CUDA_ERROR_NOT_INITIALIZED"),
     (999, "CUDA_ERROR_UNKNOWN"), (-7, "unknown error"), (2**31 - 1, "unknown error")],
)  # fmt: skip
def test_any_cuinit_error_is_a_mismatch_with_its_code_and_name(code: int, name: str) -> None:
    row = runtime_row(0, "n1", [NV[0]], cuda(f"cuInit failed: {name} ({code})", code))
    assert (row.status, row.note) == ("MISMATCH", f"cuda: cuInit failed: {name} ({code})")
    assert not row.ok


def test_only_no_library_at_all_is_unverifiable() -> None:
    none = runtime_row(0, "n1", [NV[0]], Seen(None))
    assert none.status == "UNVERIFIABLE" and "no GPU runtime library" in none.note
    stub = runtime_row(0, "n1", [NV[0]], cuda("cuInit failed: CUDA_ERROR_STUB_LIBRARY (34)", 34))
    assert stub.status == "UNVERIFIABLE" and "stub" in stub.note
    why = "libcuda.so.1 failed to load: libcuda.so.1: undefined symbol: cuFoo"
    refused = runtime_row(0, "n1", [NV[0]], cuda(why, loaded=False))
    assert (refused.status, refused.note) == ("MISMATCH", f"cuda: {why}")


def test_hip_seeing_no_device_is_a_mismatch_as_cudas_is() -> None:
    seen = Seen({"api": "hip", "error": "hipGetDeviceCount failed: hipErrorNoDevice (100)",
                 "code": 100, "devices": []})  # fmt: skip
    row = runtime_row(0, "n1", [AMD[0]], seen)
    assert row.status == "MISMATCH" and "hipErrorNoDevice" in row.note


def test_an_unreadable_device_is_said_and_never_skipped() -> None:
    """Device 0 unreadable, device 1 the planned GPU: not OK (the list used to shift)."""
    devices = [{"pci": None, "error": "cuDeviceGetPCIBusId: CUDA_ERROR_UNKNOWN (999)"},
               {"pci": NV[0]}]  # fmt: skip
    row = runtime_row(0, "n1", [NV[0]], cuda(devices=devices, count=2))
    assert row.status == "MISMATCH"
    assert row.note == "cuda device 0 unreadable (cuDeviceGetPCIBusId: CUDA_ERROR_UNKNOWN (999))"
    assert row.seen == f"?,{NV[0]}"


def test_a_huge_count_and_a_hung_call_are_mismatches() -> None:
    devices = [{"pci": NV[0]}]
    row = runtime_row(0, "n1", [NV[0]], cuda(devices=devices, count=2**31 - 1))
    assert row.status == "MISMATCH" and "2147483647 devices" in row.note
    hung = cuda("cuDeviceGetCount did not answer within 60 s")
    assert runtime_row(0, "n1", [NV[0]], hung).note == (
        "cuda: cuDeviceGetCount did not answer within 60 s"
    )


def test_what_a_driver_printed_is_escaped_and_bounded() -> None:
    row = runtime_row(0, "n1", [NV[0]], cuda("cuInit failed: \x1b[31mX\n\r\a" + "Y" * 9000, 5))
    assert "\x1b" not in row.note and "\n" not in row.note and "\\x1b[31mX\\n" in row.note
    assert len(row.note) < 200


def probe_line(rank: int, env: dict[str, str], blocks: list[dict[str, object]]) -> str:
    params = {"device_env": env, "gpu_runtimes": blocks}
    return json.dumps({"kernel": "whereami", "host": "h", "rank": rank, "params": params})


def test_each_rank_is_judged_by_its_own_vendors_runtime() -> None:
    """A node with an NVIDIA and an AMD GPU: rank 0 planned on the NVIDIA one (CUDA), rank 1
    on the AMD one (HIP); both runtimes answer both ranks. Was: both judged by CUDA."""
    planned = [
        PlannedRank(0, ((0,),), (0,), {"CUDA_VISIBLE_DEVICES": "0"}, (NV[0],)),
        PlannedRank(1, ((1,),), (1,), {"ROCR_VISIBLE_DEVICES": "0"}, (AMD[0],)),
    ]
    blocks = [{"api": "cuda", "devices": [{"pci": NV[0]}]},
              {"api": "hip", "devices": [{"pci": AMD[0]}]}]  # fmt: skip
    text = "\n".join(
        [probe_line(0, {"CUDA_VISIBLE_DEVICES": "0"}, blocks),
         probe_line(1, {"ROCR_VISIBLE_DEVICES": "0"}, blocks)]
    )  # fmt: skip
    rows = [r for r in check_env(planned, text) if r.variable == RUNTIME]
    assert [(r.rank, r.verdict) for r in rows] == [(0, "OK"), (1, "OK")]
    only_cuda = text.replace(', {"api": "hip", "devices": [{"pci": "0000:c1:00.0"}]}', "")
    rows = [r for r in check_env(planned, only_cuda) if r.variable == RUNTIME]
    assert [(r.rank, r.verdict) for r in rows] == [(0, "OK"), (1, "UNVERIFIABLE")]
    assert rows[1].note.startswith("no libamdhip64 on this node for its AMD GPUs")


def test_a_rank_with_gpus_of_both_vendors_is_judged_by_both_runtimes() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "0"}
    planned = [PlannedRank(0, ((0,),), (0,), env, (AMD[0], NV[0]))]

    def verdict_of(blocks: list[dict[str, object]]) -> tuple[str, str]:
        (row,) = [
            r for r in check_env(planned, probe_line(0, env, blocks)) if r.variable == RUNTIME
        ]
        return row.verdict, row.note

    good = [{"api": "cuda", "devices": [{"pci": NV[0]}]},
            {"api": "hip", "devices": [{"pci": AMD[0]}]}]  # fmt: skip
    assert verdict_of(good)[0] == "OK"
    wrong = [good[0], {"api": "hip", "devices": [{"pci": AMD[1]}]}]
    assert verdict_of(wrong)[0] == "MISMATCH"
    failed = [good[0], {"api": "hip", "error": "hipGetDeviceCount failed: x (35)", "code": 35}]
    assert verdict_of(failed) == ("MISMATCH", "hip: hipGetDeviceCount failed: x (35)")
    assert verdict_of(good[:1])[0] == "UNVERIFIABLE"


def test_an_intel_rank_is_not_judged_by_another_vendors_runtime() -> None:
    env = {"ZE_AFFINITY_MASK": "0", "ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}
    planned = [PlannedRank(0, ((0,),), (0,), env, ("0000:3a:00.0",))]
    blocks = [{"api": "cuda", "devices": [{"pci": NV[0]}]}]
    (row,) = [r for r in check_env(planned, probe_line(0, env, blocks)) if r.variable == RUNTIME]
    assert row.verdict == "UNVERIFIABLE" and "Level Zero" in row.note


def test_extra_ranks_get_no_device_rows_against_a_wrapped_plan_rank() -> None:
    planned = [PlannedRank(0, ((0,),), (0,), {"CUDA_VISIBLE_DEVICES": "0"}, (NV[0],))]
    blocks = [{"api": "cuda", "devices": [{"pci": NV[0]}]}]
    text = "\n".join(probe_line(r, {"CUDA_VISIBLE_DEVICES": "0"}, blocks) for r in range(3))
    assert {r.rank for r in check_env(planned, text)} == {0}


def test_an_older_probes_single_block_is_still_read() -> None:
    planned = [PlannedRank(0, ((0,),), (0,), {"CUDA_VISIBLE_DEVICES": "0"}, (NV[0],))]
    params = {"device_env": {"CUDA_VISIBLE_DEVICES": "0"},
              "gpu_runtime": {"api": "cuda", "devices": [{"pci": NV[0]}]}}  # fmt: skip
    text = json.dumps({"kernel": "whereami", "host": "h", "rank": 0, "params": params})
    (row,) = [r for r in check_env(planned, text) if r.variable == RUNTIME]
    assert row.verdict == "OK"


# ------------------------------------------------------- the probe itself (subprocesses)
def build(tmp_path: Path, source: str, soname: str, *flags: str) -> Path:
    lib = tmp_path / ("lib-" + soname + "-".join(flags))
    lib.mkdir(exist_ok=True)
    cc = [
        "cc",
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-shared",
        "-fPIC",
        "-I",
        str(HERE.parent),
    ]
    subprocess.run([*cc, *flags, "-o", str(lib / soname), str(HERE / source)], check=True)
    return lib


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both stand-in runtimes in one folder."""
    tmp = tmp_path_factory.mktemp("gpulibs")
    cuda_dir = build(tmp, "fake_libcuda.c", "libcuda.so.1")
    hip_dir = build(tmp, "fake_libamdhip64.c", "libamdhip64.so.6")
    (cuda_dir / "libamdhip64.so.6").symlink_to(hip_dir / "libamdhip64.so.6")
    return cuda_dir


def probe(lib: Path, **env: str) -> tuple[list[dict[str, object]], float]:
    """params.gpu_runtimes of kernels/bin/whereami with the stand-ins, and its wall time."""
    from topobind.measure.programs import find_kernel

    base = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "ROCR_", "TB_"))}
    base |= {"LD_LIBRARY_PATH": str(lib), "OMP_NUM_THREADS": "1", "TB_FAKE_CUDA_GPUS": CUDA_GPUS,
             "TB_FAKE_HIP_GPUS": ";".join(AMD), "TOPOBIND_GPU_PROBE_TIMEOUT": "0.5"}  # fmt: skip
    t0 = time.monotonic()
    done = subprocess.run(
        [str(find_kernel("whereami")), "--spin-ms", "0"],
        env=base | env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["params"]["gpu_runtimes"], time.monotonic() - t0


def verdict(blocks: list[dict[str, object]], api: str, planned: str) -> tuple[str, str]:
    block = next(b for b in blocks if b["api"] == api)
    row = runtime_row(0, "h", [planned], Seen(block))
    return row.verdict, row.note


CUDA_CALLS = ("dlopen", "cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetPCIBusId")
HIP_CALLS = ("hipGetDeviceCount", "hipDeviceGet", "hipDeviceGetPCIBusId")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["HANG", "CRASH"])
@pytest.mark.parametrize("call", CUDA_CALLS + HIP_CALLS)
def test_a_call_that_hangs_or_crashes_is_a_mismatch_naming_it(
    libs: Path, kind: str, call: str
) -> None:
    """Each runtime call that never returns (0.5 s bound here) or dies with SIGSEGV: the probe
    ends, the other runtime still answers, and the rank is a MISMATCH naming the call."""
    cuda = call.startswith(("cu", "dlopen"))
    api, prefix = ("cuda", "TB_FAKE_CUDA") if cuda else ("hip", "TB_FAKE_HIP")
    blocks, took = probe(libs, **{f"{prefix}_{kind}": call})
    assert took < 30
    status, note = verdict(blocks, api, NV[0] if api == "cuda" else AMD[0])
    what = "did not answer within 0.5 s" if kind == "HANG" else "crashed (signal 11)"
    named = "dlopen(libcuda.so.1)" if call == "dlopen" else call
    assert status == "MISMATCH" and named in note and what in note, note
    other = verdict(blocks, "hip" if api == "cuda" else "cuda", AMD[0] if api == "cuda" else NV[1])
    assert other[0] in ("OK", "MISMATCH") and "crashed" not in other[1]


@pytest.mark.slow
@pytest.mark.parametrize("code", ["46", "3", "999", "-1", "2147483647"])
def test_the_probe_records_each_cuinit_code_with_its_name(libs: Path, code: str) -> None:
    blocks, _ = probe(libs, TB_FAKE_CUDA_FAIL=f"cuInit={code}")
    status, note = verdict(blocks, "cuda", NV[1])
    assert status == "MISMATCH" and note.startswith("cuda: cuInit failed: ")
    assert note.endswith(f"({code})")
    if code == "46":
        assert "CUDA_ERROR_DEVICES_UNAVAILABLE" in note


@pytest.mark.slow
def test_an_unreadable_device_stays_in_the_list(libs: Path) -> None:
    """Without CUDA_DEVICE_ORDER the faster GPU NV[1] is device 0; its bus id fails: the rank
    planned on it is no OK, and device 1 is not taken for device 0."""
    for call in ("cuDeviceGetPCIBusId@0", "cuDeviceGet@0"):
        blocks, _ = probe(libs, TB_FAKE_CUDA_FAIL=f"{call}=999")
        (cuda_block,) = [b for b in blocks if b["api"] == "cuda"]
        assert len(cuda_block["devices"]) == 2  # type: ignore[arg-type]
        status, note = verdict(blocks, "cuda", NV[1])
        assert status == "MISMATCH"
        assert note == f"cuda device 0 unreadable ({call[:-2]}: CUDA_ERROR_UNKNOWN (999))"


@pytest.mark.slow
def test_an_unreadable_hip_device_stays_in_the_list(libs: Path) -> None:
    for call in ("hipDeviceGetPCIBusId@0", "hipDeviceGet@0"):
        blocks, _ = probe(libs, TB_FAKE_HIP_FAIL=f"{call}=101")
        (hip,) = [b for b in blocks if b["api"] == "hip"]
        assert len(hip["devices"]) == 2  # type: ignore[arg-type]
        assert verdict(blocks, "hip", AMD[1]) == (
            "MISMATCH",
            f"hip device 0 unreadable ({call[:-2]}: hipErrorInvalidDevice (101))",
        )


@pytest.mark.slow
def test_a_count_of_int_max_is_bounded(libs: Path) -> None:
    for var in ("TB_FAKE_CUDA_COUNT", "TB_FAKE_HIP_COUNT"):
        blocks, took = probe(libs, **{var: str(2**31 - 1)})
        assert took < 30
        api = "cuda" if "CUDA" in var else "hip"
        (block,) = [b for b in blocks if b["api"] == api]
        assert len(block["devices"]) == 64  # type: ignore[arg-type]
        assert verdict(blocks, api, NV[1] if api == "cuda" else AMD[0])[0] == "MISMATCH"


@pytest.mark.slow
def test_garbage_strings_from_the_driver_are_cut_and_escaped(libs: Path) -> None:
    blocks, _ = probe(libs, TB_FAKE_CUDA_GARBAGE="busid")
    status, note = verdict(blocks, "cuda", NV[1])
    assert status == "MISMATCH" and "\\xff" in note and "\xff" not in note
    blocks, _ = probe(libs, TB_FAKE_CUDA_GARBAGE="name", TB_FAKE_CUDA_FAIL="cuInit=-7")
    status, note = verdict(blocks, "cuda", NV[1])
    assert status == "MISMATCH" and "\\x1b[31mRED\\x0a" in note and note.endswith("(-7)")
    assert all(" " <= c <= "~" for c in note)


@pytest.mark.slow
def test_a_library_the_loader_refuses_says_the_loaders_error(tmp_path: Path) -> None:
    lib = build(tmp_path, "fake_libcuda.c", "libcuda.so.1", "-DTB_FAKE_UNLOADABLE")
    blocks, _ = probe(lib)
    assert [b["api"] for b in blocks] == ["cuda"]  # no HIP library there: none listed
    status, note = verdict(blocks, "cuda", NV[1])
    assert status == "MISMATCH"
    assert "libcuda.so.1 failed to load" in note and "undefined symbol" in note


@pytest.mark.slow
def test_hip_with_nothing_visible_is_a_mismatch(libs: Path) -> None:
    blocks, _ = probe(libs, ROCR_VISIBLE_DEVICES="7")
    status, note = verdict(blocks, "hip", AMD[0])
    assert status == "MISMATCH" and "hipErrorNoDevice" in note


@pytest.mark.slow
def test_both_runtimes_answer_on_a_two_vendor_node(libs: Path) -> None:
    blocks, _ = probe(libs, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES="0",
                      ROCR_VISIBLE_DEVICES="1")  # fmt: skip
    assert verdict(blocks, "cuda", NV[0])[0] == "OK"
    assert verdict(blocks, "hip", AMD[1])[0] == "OK"
