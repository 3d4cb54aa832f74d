"""What runs on every node of a job is built for the architecture's baseline (issue 31 item 6):
the per-rank step (rankexec), the LD_PRELOAD shim and the SPANK plugin are built once, on a
login node, and run on compute nodes of other CPUs and in the QEMU guest of scripts/numa-vm.
Built with -march=native on an AVX-512 host they died there with SIGILL; the benchmark kernels
stay native (they measure the node they were built for). The C library they all link (libtb/,
issue 38 item 5) is built once, for the baseline, and its sources by no other Makefile."""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from paths import RANKSTEP_BIN, REPO

KERNELS = REPO / "kernels"
RANKSTEP = REPO / "rankstep"
LIBTB = REPO / "libtb"
# The C files whose code is in rankexec (a static binary: glibc's AVX variants are in it too,
# chosen at run time by CPUID; only our own functions are judged).
RANKEXEC_SOURCES = [RANKSTEP / "rankexec.c"] + [
    LIBTB / "src" / f"tb_{name}.c" for name in ("step", "util", "env", "json")
]
X86 = platform.machine() == "x86_64"


def dry_run(*args: str) -> str:
    out = subprocess.run(
        ["make", "-B", "-n", *args], capture_output=True, text=True, timeout=60, check=True
    )
    return out.stdout


@pytest.mark.parametrize("cflags", [None, "-O3 -march=native"])
def test_make_builds_the_step_the_shim_and_the_plugin_for_the_baseline(cflags: str | None) -> None:
    """Also when the kernels' CFLAGS ask for -march=native on the command line."""
    extra = [f"CFLAGS={cflags}"] if cflags else []
    step = dry_run("-C", str(RANKSTEP), "bin/rankexec", "bin/libtbhugepages.so", *extra)
    plugin = dry_run("-C", str(RANKSTEP), "spank", *extra)
    built_by = [(step, "bin/rankexec"), (step, "bin/libtbhugepages.so"),
                (plugin, "bin/topobind_spank.so"), (plugin, "bin/tb-spank-option")]  # fmt: skip
    for text, built in built_by:
        assert built in text
        assert "-march=native" not in text, text
        if X86:
            assert "-march=x86-64 -mtune=generic" in text, text
    kernels = dry_run("-C", str(KERNELS), "bin/stream")
    assert "-march=native" in kernels  # the benchmarks stay native, as the Makefile says
    libtb = [line for line in kernels.splitlines() if " -c src/tb_" in line]
    assert libtb and all("-march=native" not in line for line in libtb), kernels


def compiled_sources(line: str) -> list[str]:
    """The C files a compiler command line names."""
    return [word for word in line.split() if word.endswith(".c")]


def test_libtb_is_the_one_place_its_sources_are_compiled() -> None:
    """Issue 38 item 5: the step, the shim, the plugins, the probes and the kernels link the
    one libtb.a; no Makefile compiles its sources again (as rankstep/ compiled tb_util.c,
    tb_env.c and tb_smaps.c a second time)."""
    text = dry_run("-C", str(REPO), "kernels", "spank", "CFLAGS=-O3 -march=native")
    ours = {src.name for src in (LIBTB / "src").glob("*.c")}
    for line in text.splitlines():
        named = {Path(src).name for src in compiled_sources(line)}
        if named & ours:
            assert " -c src/" in line and len(named) == 1, line  # libtb's own Makefile
            assert "-march=native" not in line, line
    links = [line for line in text.splitlines() if "libtb.a" in line and " -o " in line]
    archives = {word for line in links for word in line.split() if word.endswith("libtb.a")}
    assert len(archives) == 1, archives  # one library, in one place


@pytest.mark.parametrize("cflags", [None, "-O3 -march=native"])
def test_the_placement_probe_is_built_for_the_baseline(cflags: str | None) -> None:
    """whereami is what --verify starts on every node of a job: built on a login node with
    -march=native (as it was, with the benchmarks) it would die with SIGILL on an older node."""
    extra = [f"CFLAGS={cflags}"] if cflags else []
    text = dry_run("-C", str(KERNELS), "bin/whereami", *extra)
    assert "-o bin/whereami" in text and "-march=native" not in text, text
    if X86:
        assert "-march=x86-64 -mtune=generic" in text, text


def test_make_kernels_builds_the_rank_step_beside_the_kernels() -> None:
    """The top-level 'make kernels' (what the docs and a new user run) builds rankstep/ too:
    'topobind run' needs rankexec and the shim; the kernels' -march=native stays in kernels/."""
    text = dry_run("-C", str(REPO), "kernels")
    step = text[text.index("make -C rankstep") : text.index("make -C kernels")]
    assert "-o bin/rankexec" in step and "-o bin/libtbhugepages.so" in step, text
    assert "-march=native" not in step
    assert "-o bin/stream" in text[text.index("make -C kernels") :]


def defined_functions(sources: list[Path]) -> set[str]:
    """Names of the functions defined in C SOURCES (the project's style: the signature, then
    '{' alone on the next line)."""
    found: set[str] = set()
    for src in sources:
        text = src.read_text()
        found |= set(re.findall(r"^[a-z_][^\n;{}#=]*?\b(\w+)\([^;{}]*\)\s*\n\{", text, re.M))
    return found


VECTOR = re.compile(r"%[yz]mm\d|\tv(?!erw|err|m)[a-z0-9]+ ")


def vector_functions(binary: Path, only: set[str] | None) -> dict[str, str]:
    """Functions of BINARY (those named in ONLY, or all) with an AVX instruction: a ymm or zmm
    register or a VEX/EVEX mnemonic (vmovdqu, vpxor, vzeroupper ...), with the first one."""
    text = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(binary)],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    hits: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if m := re.match(r"^[0-9a-f]+ <([^>]+)>:$", line):
            name = m[1]
        elif (only is None or name in only) and name not in hits and VECTOR.search(line):
            hits[name] = line.strip()
    return hits


needs_objdump = pytest.mark.skipif(
    not X86 or not shutil.which("objdump"), reason="x86_64 with binutils' objdump"
)


@needs_objdump
def test_the_function_finder_sees_rankexecs_functions() -> None:
    names = defined_functions(RANKEXEC_SOURCES)
    step = {"main", "sample", "tb_step_choose", "tb_step_fields", "tb_list_parse"}
    assert step | {"tb_env_number", "tb_env_rank"} <= names


@needs_objdump
def test_the_scan_finds_avx_code(tmp_path: Path) -> None:
    """The scan itself: a function built for AVX2 is found, the same built for the baseline
    is not."""
    src = tmp_path / "v.c"
    src.write_text("void scale(double *x, int n)\n{\n    for (int i = 0; i < n; i++)\n"
                   "        x[i] *= 3.0;\n}\n")  # fmt: skip
    for march, found in (("-march=haswell", True), ("-march=x86-64", False)):
        obj = tmp_path / "v.o"
        subprocess.run(["cc", "-O3", march, "-c", str(src), "-o", str(obj)], check=True)
        assert bool(vector_functions(obj, defined_functions([src]))) is found, march


BUILT = {
    "rankexec": RANKSTEP_BIN, "libtbhugepages.so": RANKSTEP_BIN, "topobind_spank.so": RANKSTEP_BIN,
    "topobind_flux.so": RANKSTEP_BIN, "whereami": KERNELS / "bin",
    "whereami-mpi": KERNELS / "bin", "libtb.a": LIBTB / "build",
}  # fmt: skip


@needs_objdump
@pytest.mark.parametrize("name", sorted(BUILT))
def test_the_built_step_shim_probes_plugins_and_library_hold_no_avx(name: str) -> None:
    path = BUILT[name] / name
    if not path.exists():
        pytest.skip(f"{path} not built (make kernels / make spank / make flux)")
    only = defined_functions(RANKEXEC_SOURCES) if name == "rankexec" else None
    assert vector_functions(path, only) == {}


@pytest.mark.parametrize("plugin", ["topobind_spank.c", "topobind_flux.c"])
def test_the_plugins_plan_through_libtb_alone(plugin: str) -> None:
    """Issue 38 item 5: the SPANK and Flux plugins built the `topobind plan` command and
    forked the planner each in their own copy; both now call tb_plan_argv and
    tb_planner_run (libtb/src/tb_planner.c), and neither spells the command or forks."""
    text = (RANKSTEP / plugin).read_text()
    assert "tb_plan_argv(" in text and "tb_planner_run(" in text
    for own in ("fork(", "execvp", "pipe2(", '"--slurm-cores"', "topology_here", "rankexec 2"):
        assert own not in text, f"{plugin} has its own {own}"
    planner = (LIBTB / "src" / "tb_planner.c").read_text()
    assert planner.count("fork(") == 1 and '"--slurm-cores"' in planner


CLONE = re.compile(r"\.(avx512f|avx2)$")


def clone_check(stream: Path) -> None:
    """STREAM built for the baseline: AVX code only in the run-time copies of its loops
    (block_kernel.avx2, .avx512f), never in the default path; an AVX2 copy is there."""
    hits = vector_functions(stream, None)
    assert {name for name in hits if not CLONE.search(name)} == set(), hits
    assert "block_kernel.avx2" in hits and "%ymm" in hits["block_kernel.avx2"], hits


def expected_path() -> str:
    """The copy GCC's resolver takes on this CPU (its order: AVX-512F, AVX2, the default)."""
    flags = set(re.findall(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)[0].split())
    return "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "default"


@pytest.mark.slow
@needs_objdump
def test_a_baseline_stream_picks_its_vector_path_at_run_time(tmp_path: Path) -> None:
    """Issue 38 item 1: the wheel's kernels are built for the baseline and may pick their
    vector path at run time. STREAM's loops have AVX2 and AVX-512F copies, its default path
    none, and the result says which copy ran."""
    bin_dir = tmp_path / "bin"
    subprocess.run(["make", "-s", "-C", str(KERNELS), f"BIN={bin_dir}", "CFLAGS=-O3 $(STEP_ARCH)",
                    f"{bin_dir}/stream"], check=True, timeout=300)  # fmt: skip
    clone_check(bin_dir / "stream")
    for extra, path in (([], expected_path()), (["--nontemporal"], None)):
        out = subprocess.run([str(bin_dir / "stream"), "--elements", "100k", "--trials", "2",
                              "--pages", "4k", *extra], capture_output=True, text=True,
                             timeout=120, check=True)  # fmt: skip
        params = json.loads(out.stdout)["params"]
        assert params["vector_path"] == path and params["vector_clones"] is True, params
