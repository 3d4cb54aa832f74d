"""Bad input, class by class, for every command that reads a topology or plans a layout.

Each case runs the real ``topobind`` and asserts the project's rule for bad input: a non-zero
exit (2), exactly one line on stderr that starts with ``topobind: error:`` and names the
input, nothing on stdout, no traceback, no file written (the working directory and $TMPDIR
stay empty, special files stay what they were), and bounded work: the subprocess timeout is
only a hang detector, far above what a refusal costs.

Classes: topology sources (missing, directory, FIFO, device, empty, binary, truncated,
not hwloc, oversized, unreadable, too deep, too many PUs, non-number attributes, synthetic
descriptions too big or malformed), numbers (zero, negative, huge, many digits, non-ASCII
digits, nan, float, padded), names (layouts, formats, host names) and output files (the
rankfile path on a device, a FIFO, a directory, a missing directory), for ``show``,
``plan`` in every format, ``env``, ``run --dry-run`` and ``verify``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_helpers import Cli, run_topobind
from paths import TOPOLOGIES
from topo_sources import BETZY

pytestmark = pytest.mark.slow

HANG = 20  # seconds: a hang detector only; a refusal takes well under a second
SMALL_XML = TOPOLOGIES / "fakecpukinds.xml"
FORMATS = ("text", "picture", "json", "env", "openmpi", "openmpi4", "srun", "rankfile", "rankfile4")


@dataclass(frozen=True)
class Bad:
    """One bad input: the arguments that carry it and what the error line must name."""

    id: str
    args: tuple[str, ...]
    names: str


PU0 = 'type="PU" os_index="0"'
NUMA0 = 'type="NUMANode" os_index="0"'
ALLOWED = 'allowed_cpuset="0x0000000f"'
#: file name -> (text of fakecpukinds.xml, its replacement)
XML_VARIANTS = {
    "os_index-abc.xml": (PU0, 'type="PU" os_index="abc"'),
    "os_index-super2.xml": (PU0, 'type="PU" os_index="²"'),
    "os_index-30digits.xml": (PU0, 'type="PU" os_index="' + "9" * 30 + '"'),
    "os_index-negative.xml": (PU0, 'type="PU" os_index="-7"'),
    "memory-lots.xml": (NUMA0, NUMA0 + ' local_memory="lots"'),
    "numa-os_index-nan.xml": (NUMA0, 'type="NUMANode" os_index="nan"'),
    "cpuset-garbage.xml": (ALLOWED, 'allowed_cpuset="0xZZ"'),
    "cpuset-negative.xml": (ALLOWED, 'allowed_cpuset="-0x1"'),
    "cpuset-wide-word.xml": (ALLOWED, 'allowed_cpuset="0x' + "f" * 5000 + '"'),
    "cpuset-long.xml": (ALLOWED, 'allowed_cpuset="' + "0xffffffff," * 40000 + '0xf"'),
}


def _xml_variant(old: str, new: str) -> str:
    text = SMALL_XML.read_text()
    assert old in text
    return text.replace(old, new, 1)


def _many_pus_xml(n: int) -> str:
    pus = "".join(
        f'<object type="PU" os_index="{i}" cpuset="0x1" complete_cpuset="0x1"/>' for i in range(n)
    )
    return f'<topology version="2.0"><object type="Machine" cpuset="0x1">{pus}</object></topology>'


def _deep_xml(depth: int) -> str:
    return (
        '<topology version="2.0"><object type="Machine">'
        + '<object type="Group">' * depth
        + '<object type="PU" os_index="0"/>'
        + "</object>" * depth
        + "</object></topology>"
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad-inputs")
    out: dict[str, Path] = {}

    def put(name: str, data: str | bytes) -> None:
        path = d / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        out[name] = path

    put("empty.xml", "")
    put("binary.xml", bytes(range(256)) * 8)
    put("truncated.xml", SMALL_XML.read_text()[:700])
    put("not-hwloc.xml", '<?xml version="1.0"?><html><body/></html>')
    for name, (old, new) in XML_VARIANTS.items():
        put(name, _xml_variant(old, new))
    put("too-deep.xml", _deep_xml(5000))
    put("too-many-pus.xml", _many_pus_xml(16385))
    put(
        "too-many-tags.xml",
        _many_pus_xml(1).replace("<object type", "<misc/>" * 530000 + "<object type", 1),
    )
    put("plan-not-json.json", "{not json")
    put("plan-deep.json", "[" * 100000)
    put("plan-wrong.json", '{"schema": "topobind.plan/1", "ranks": [{"rank": "nan"}]}')
    put("plan-list.json", "[1, 2, 3]")
    put("plan-empty.json", "")
    put("plan-binary.json", b"\xff\xfe\x00garbage")
    os.mkfifo(d / "fifo.xml")
    out["fifo.xml"] = d / "fifo.xml"
    os.mkfifo(d / "fifo.json")
    out["fifo.json"] = d / "fifo.json"
    huge = d / "huge.xml"  # sparse: its size says 65 MiB, no disk is used
    with open(huge, "wb") as fh:
        fh.truncate((64 << 20) + 1)
    out["huge.xml"] = huge
    unreadable = d / "unreadable.xml"
    unreadable.write_text(SMALL_XML.read_text())
    unreadable.chmod(0)
    out["unreadable.xml"] = unreadable
    os.symlink("loop.xml", d / "loop.xml")  # a symlink to itself
    out["loop.xml"] = d / "loop.xml"
    (d / "a-dir.xml").mkdir()
    out["a-dir.xml"] = d / "a-dir.xml"
    return out


def topology_cases() -> list[Bad]:
    """-t SOURCE cases; the file names are resolved by the ``files`` fixture ('@name')."""
    named = [
        "empty.xml",
        "binary.xml",
        "truncated.xml",
        "not-hwloc.xml",
        *XML_VARIANTS,
        "too-deep.xml",
        "too-many-pus.xml",
        "too-many-tags.xml",
        "fifo.xml",
        "huge.xml",
        "unreadable.xml",
        "a-dir.xml",
        "loop.xml",
    ]
    cases = [Bad(n, ("-t", f"@{n}"), f"@{n}") for n in named]
    cases += [
        Bad("missing", ("-t", "/nonexistent/node.xml"), "/nonexistent/node.xml"),
        Bad("missing-no-suffix", ("-t", "nodeX"), "nodeX"),
        Bad("dev-zero", ("-t", "/dev/zero"), "/dev/zero"),
        Bad("dev-null", ("-t", "/dev/null"), "/dev/null"),
        Bad("unreadable-even-for-root", ("-t", "/proc/self/mem"), "/proc/self/mem"),
        Bad("a-sysfs-directory", ("-t", "/sys/kernel"), "/sys/kernel"),
        Bad("name-too-long", ("-t", "x" * 5000 + ".xml"), "xxxxxxxx"),
        Bad("synthetic-million", ("-t", "synthetic:pack:1000 core:1000 pu:1"), "pack:1000"),
        Bad("synthetic-digits", ("-t", "synthetic:pack:" + "9" * 40), "synthetic"),
        Bad("synthetic-bare-million", ("-t", "synthetic:1000 1000"), "1000 1000"),
        Bad("synthetic-zero", ("-t", "synthetic:pack:0 pu:2"), "pack:0"),
        Bad("synthetic-garbage", ("-t", "synthetic:%%%"), "%%%"),
        Bad("synthetic-empty", ("-t", "synthetic:"), "synthetic"),
    ]
    return cases


def number_cases() -> list[Bad]:
    values = ["0", "-1", "-0", "100000000", "9" * 40, "1e9", "nan", "inf", "2.5", "", " 4", "1_000"]
    values += ["٣", "²", "４"]  # Arabic-Indic 3 and fullwidth 4 (int() takes both), superscript
    cases = []
    for flag in ("--ranks", "--threads"):
        cases += [Bad(f"{flag}={v!r}", (flag, v), flag) for v in values]
        cases.append(Bad(f"{flag}-more-than-pus", (flag, "300000"), flag))
    return cases


def name_cases() -> list[Bad]:
    return [
        Bad("layout-unknown", ("-l", "zigzag"), "zigzag"),
        Bad("layout-empty", ("-l", ""), "layout"),
        Bad("layout-superscript", ("-l", "l3-groups:²"), "l3-groups:²"),
        Bad("layout-negative", ("-l", "l3-groups:-4"), "l3-groups:-4"),
        Bad("layout-huge", ("-l", "l3-groups:" + "9" * 5000), "l3-groups"),
        Bad("layout-param-on-plain", ("-l", "per-l3:4"), "per-l3"),
        Bad("layout-long", ("-l", "x" * 100000), "xxxx"),
    ]


def _resolve(args: tuple[str, ...], files: dict[str, Path]) -> list[str]:
    return [str(files[a[1:]]) if a.startswith("@") else a for a in args]


def _check(argv: list[str], names: str, cwd: Path, tmpdir: Path) -> None:
    special = {p: os.lstat(p).st_mode for p in ("/dev/null", "/dev/zero")}
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    env.pop("SLURM_JOB_ID", None)
    out = run_topobind(*argv, cwd=cwd, env=env, timeout=HANG)
    lines = out.stderr.splitlines()
    assert out.returncode == 2, (argv[:6], out.returncode, out.stderr[-500:])
    assert "Traceback" not in out.stderr
    assert len(lines) == 1 and lines[0].startswith("topobind: error: "), out.stderr[-800:]
    assert names[:60] in lines[0], (names[:60], lines[0][:300])
    assert len(lines[0]) < 1000, lines[0][:300]
    assert out.stdout == ""
    assert not list(cwd.iterdir()) and not list(tmpdir.iterdir())
    assert {p: os.lstat(p).st_mode for p in special} == special


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    cwd, tmpdir = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmpdir.mkdir()
    return cwd, tmpdir


COMMANDS = {
    "show": ("show",),
    "plan": ("plan", "-l", "compact"),
    "env": ("env", "-l", "compact"),
    "run-dry": ("run", "--dry-run", "-l", "compact"),
    "verify": ("verify", "-l", "compact"),
}
TAIL = {"run-dry": ("--", "true"), "verify": ("--", "true")}


@pytest.mark.parametrize("bad", topology_cases(), ids=lambda b: b.id)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_bad_topology(command: str, bad: Bad, files: dict[str, Path], tmp_path: Path) -> None:
    if bad.id == "unreadable.xml" and os.geteuid() == 0:
        pytest.skip("root reads a file of mode 000")
    names = _resolve((bad.names,), files)[0]
    argv = [*COMMANDS[command], *_resolve(bad.args, files), *TAIL.get(command, ())]
    _check(argv, names, *_dirs(tmp_path))


@pytest.mark.parametrize("bad", [*number_cases(), *name_cases()], ids=lambda b: b.id)
@pytest.mark.parametrize("command", ["plan", "env", "run-dry", "verify"])
def test_bad_numbers_and_names(command: str, bad: Bad, tmp_path: Path) -> None:
    base = [c for c in COMMANDS[command] if c not in ("-l", "compact")]
    layout = [] if "-l" in bad.args else ["-l", "per-l3"]
    argv = [*base, "-t", BETZY, *layout, *bad.args, *TAIL.get(command, ())]
    _check(argv, bad.names, *_dirs(tmp_path))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "bad",
    [
        Bad("per-l3-billion-ranks", ("-l", "per-l3", "-r", "100000000"), "--ranks"),
        Bad("l3-groups-many-ranks", ("-l", "l3-groups:8", "-r", "256000"), "--ranks"),
        Bad("per-numa-uneven-ranks", ("-l", "per-numa", "-r", "12"), "per-numa"),
        Bad("per-numa-too-many-ranks", ("-l", "per-numa", "-r", "200"), "--ranks 200"),
        Bad("host-with-slot", ("-l", "every-other-core", "--host", "node 1 slot=99"), "--host"),
        Bad("host-empty", ("-l", "every-other-core", "--host", ""), "--host"),
        Bad("host-equals", ("-l", "every-other-core", "--host", "a=b"), "--host"),
        Bad("format", ("-l", "compact", "-f", "yaml"), "yaml"),
    ],
    ids=lambda b: b.id,
)
def test_bad_plan_in_every_format(fmt: str, bad: Bad, tmp_path: Path) -> None:
    args = list(bad.args) if "-f" in bad.args else [*bad.args, "-f", fmt]
    _check(["plan", "-t", BETZY, *args], bad.names, *_dirs(tmp_path))


@pytest.mark.parametrize("target", ["/dev/null", "fifo", "dir", "missing/rf"])
def test_rankfile_path_that_is_not_a_file(target: str, tmp_path: Path) -> None:
    cwd, tmpdir = _dirs(tmp_path)
    elsewhere = tmp_path / "out"
    elsewhere.mkdir()
    path = {
        "/dev/null": "/dev/null",
        "fifo": str(elsewhere / "fifo"),
        "dir": str(elsewhere),
        "missing/rf": str(elsewhere / "missing" / "rf"),
    }[target]
    if target == "fifo":
        os.mkfifo(path)
    before = sorted(os.listdir(elsewhere))
    argv = ["plan", "-t", BETZY, "-l", "every-other-core", "-f", "openmpi", "--rankfile", path]
    _check(argv, path, cwd, tmpdir)
    assert sorted(os.listdir(elsewhere)) == before
    if target == "fifo":
        assert stat.S_ISFIFO(os.lstat(path).st_mode)


@pytest.mark.parametrize(
    "name",
    [
        "plan-not-json.json",
        "plan-deep.json",
        "plan-wrong.json",
        "plan-list.json",
        "plan-empty.json",
        "plan-binary.json",
        "fifo.json",
        "a-dir.xml",
    ],
)
def test_verify_bad_plan_file(name: str, files: dict[str, Path], tmp_path: Path) -> None:
    path = str(files[name])
    _check(["verify", "--plan", path, "--", "true"], path, *_dirs(tmp_path))


@pytest.mark.parametrize("path", ["/dev/zero", "/nonexistent/plan.json"])
def test_verify_plan_special_paths(path: str, tmp_path: Path) -> None:
    _check(["verify", "--plan", path, "--", "true"], path, *_dirs(tmp_path))


def test_many_pus_synthetic_at_the_limit_is_refused_before_hwloc(tmp_path: Path) -> None:
    """16385 PUs: refused from the description alone (hwloc would need seconds)."""
    _check(["show", "-t", "synthetic:pack:5 core:3277 pu:1"], "pack:5", *_dirs(tmp_path))


def test_valid_neighbours_still_work(
    files: dict[str, Path], tmp_path: Path, topobind_cli: Cli
) -> None:
    """The limits leave real inputs alone: the shared XMLs, an XML beside the bad ones
    (every kind of core: fakecpukinds.xml has fewer performance cores than 2)."""
    good = tmp_path / "good.xml"
    good.write_text(SMALL_XML.read_text())
    for src in (str(good), BETZY):
        out = topobind_cli(
            "plan", "-t", src, "-l", "compact", "-r", "2", "-T", "1", "--cpukind=all", timeout=HANG
        )
        assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("ranks", ["3", "4"])
def test_threads_not_blamed_when_not_given(ranks: str, tmp_path: Path, topobind_cli: Cli) -> None:
    """per-numa -r 3 on a 2-core node said '--threads must be at least 1 (got 0)'."""
    argv = ["plan", "-t", str(SMALL_XML), "-l", "per-numa", "-r", ranks]
    _check(argv, "--ranks", *_dirs(tmp_path))
    out = topobind_cli(*argv, timeout=HANG)
    assert "--threads" not in out.stderr


def test_per_numa_names_the_pus_outside_allowed_numa_nodes(tmp_path: Path) -> None:
    """NUMA nodes that `show` lists but the allowed nodeset excludes: not 'has none'."""
    src = str(TOPOLOGIES / "16amd64-8n2c-cpusets.xml")
    _check(["plan", "-t", src, "-l", "per-numa"], "usable PUs 0-1,12-15", *_dirs(tmp_path))
