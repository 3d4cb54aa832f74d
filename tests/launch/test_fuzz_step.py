"""Property tests (Hypothesis, tests/fuzzing.py) of the per-rank step's outside input, through
the C code itself (issue 31, "a net for the next ones"): the memory fields of a step-file line
through rankstep/bin/rankexec, and srun's --topobind=... option through the SPANK plugin's
parser (rankstep/bin/tb-spank-option, the plugins' libtb/src/tb_option.c without Slurm).

The property: the right result, or one error line and exit 125 with the program not run
(rankexec); one error line, or the argv words `topobind plan` gets, each one option
(the plugin). Never a crash, a hang (the subprocess timeouts) or a narrowed policy."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
from fuzzing import fuzz
from hypothesis import example, given
from hypothesis import strategies as st
from paths import RANKSTEP_BIN

RANKEXEC = RANKSTEP_BIN / "rankexec"
OPTION = RANKSTEP_BIN / "tb-spank-option"
pytestmark = pytest.mark.slow


def _nodes_here() -> set[int]:
    """The NUMA nodes with memory that this process may use."""
    status = Path("/proc/self/status").read_text()
    allowed = re.search(r"^Mems_allowed_list:\s*(\S+)", status, re.M)
    have = Path("/sys/devices/system/node/has_memory").read_text().strip()
    return _parse(have) & (_parse(allowed[1]) if allowed else _parse(have))  # type: ignore[operator]


def _parse(text: str) -> set[int] | None:
    """tb_list_parse's grammar: N or A-B (A <= B <= 1000000), comma separated, one trailing
    comma allowed; None when malformed."""
    if not re.fullmatch(r"(\d+(-\d+)?)(,\d+(-\d+)?)*,?", text):
        return None
    nodes: set[int] = set()
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        lo, hi = int(a), int(b or a)
        if lo > hi or hi > 1_000_000:
            return None
        nodes |= set(range(lo, hi + 1))
    return nodes


node = st.one_of(st.integers(0, 3), st.integers(0, 2000), st.sampled_from([1023, 1024, 10**20]))
node_list = st.one_of(
    st.lists(
        st.one_of(node.map(str), st.tuples(node, node).map(lambda t: f"{t[0]}-{t[1]}")),
        min_size=1, max_size=4,
    ).map(",".join),
    st.text(alphabet="0123456789,-: x\u0660", max_size=12),
)  # fmt: skip
mem_field = st.tuples(
    st.sampled_from(["bind", "interleave", "preferred", "local", "Bind", ""]), node_list
).map(lambda t: f"{t[0]}:{t[1]}")


@pytest.mark.skipif(not RANKEXEC.exists(), reason="make kernels")
@fuzz(60)
@given(mem=mem_field, thp=st.sampled_from(["", "off", "on", "of"]))
@example(mem="interleave:0,5", thp="")
@example(mem="bind:0-1000000", thp="off")
def test_memory_fields_through_rankexec(tmp_path_factory: pytest.TempPathFactory, mem: str,
                                        thp: str) -> None:  # fmt: skip
    tmp = tmp_path_factory.mktemp("step")
    step = tmp / "step.txt"
    fields = [f"%mem={mem}"] + ([f"%thp={thp}"] if thp else [])
    step.write_text("topobind-rankexec 3\n@*\n0\t" + "\t".join(fields) + "\tX=1\n")
    step.chmod(0o600)
    out = subprocess.run(
        [str(RANKEXEC), str(step), "sh", "-c", "head -1 /proc/self/numa_maps"],
        capture_output=True, text=True, timeout=30, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    mode, _, text = mem.partition(":")
    nodes = _parse(text)
    good = (
        mode in ("bind", "interleave", "preferred")
        and nodes is not None
        and all(n < 1024 for n in nodes)
        and nodes <= _nodes_here()
        and thp in ("", "off")
    )
    if not good:
        assert out.returncode == 125, (mem, thp, out)
        assert out.stdout == ""  # the program did not run
        assert out.stderr.startswith("topobind rankexec: error: ") and out.stderr.count("\n") == 1
        return
    assert out.returncode == 0, (mem, thp, out.stderr)
    policy = out.stdout.split(" file=")[0].split(" ", 1)[1]  # "interleave:0", "prefer (many):0"
    name, _, kept = policy.partition(":")
    assert name.split()[0] == {"preferred": "prefer"}.get(mode, mode)
    assert _ranges(kept) == nodes  # numa_maps writes ranges: "interleave:0-3"


def _ranges(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out


# ----------------------------------------------------------------- the SPANK option
RESERVED = ("ranks", "slurm-cores", "topology", "format", "layout", "check", "rankfile", "force",
            "host", "help")  # fmt: skip
word = st.text(alphabet="abcz019-_=:,.;/ A+\u0660", max_size=10)
option = st.one_of(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-:=,._/ ;A\u0660", max_size=40),
    st.tuples(
        st.sampled_from(["spread", "l3-groups", "compact", "per-l3", "-x", "Spread", ""]),
        st.lists(word, max_size=4),
    ).map(lambda t: ":".join([t[0], *t[1]]) if t[1] else t[0]),
)


def _parsed(options: list[str]) -> list[list[str]]:
    out = subprocess.run(
        [str(OPTION), *options], capture_output=True, text=True, timeout=30
    )  # fmt: skip
    assert out.stderr == "" and out.returncode in (0, 1), out
    blocks = out.stdout.split("\n\n")
    assert blocks[-1] == "" and len(blocks) == len(options) + 1, out.stdout
    return [b.split("\n") for b in blocks[:-1]]


@pytest.mark.skipif(not OPTION.exists(), reason="make spank-option")
@fuzz(150)
@given(opt=option)
@example(opt="l3-groups:-1")
@example(opt="spread:smt=--force")
@example(opt="l3-groups:2:threads=2,smt")
def test_spank_option_strings_through_the_plugins_parser(opt: str) -> None:
    """One error line naming the option, or `--layout LAYOUT` and one `--NAME[=VALUE]` word
    per option: a name that starts with a letter (no '---1'), never one the plugin sets, and
    the words give the option back."""
    (lines,) = _parsed([opt])
    if lines[0].startswith("error: "):
        assert len(lines) == 1 and lines[0].startswith(f"error: --topobind={opt[:80]}")
        return
    assert lines[0].startswith("ok threads=") and lines[0].endswith("full=0"), lines
    words = lines[1:]
    assert words[:1] == ["--layout"] and len(words) >= 2
    layout, rest = words[1], words[2:]
    assert re.fullmatch(r"[a-z][a-z0-9-]*(:\d+)?", layout), words
    for w in rest:
        assert re.fullmatch(r"--[a-z][a-z0-9-]*(=[A-Za-z0-9_.:/+-]+)?", w), words
        name = w[2:].split("=")[0]
        assert not any(r.startswith(name) for r in RESERVED), words
    back = layout + (":" + ",".join(w[2:] for w in rest) if rest else "")
    assert back == opt
    threads = any(w.split("=")[0] == "--threads" for w in rest)
    assert lines[0].startswith(f"ok threads={int(threads)}")


# ----------------------------------------------------------------- the step file's lines
HOST = socket.gethostname()
MAX_RANK = 100_000_000  # TB_MAX_RANK (libtb/include/tb/env.h)
HEADERS = ["topobind-rankexec 1", "topobind-rankexec 2", "topobind-rankexec 3"]
rank_token = st.one_of(
    st.sampled_from(["0", "1", "00", "01", "+0", "-1", " 0", "0 ", "1x", "", "٠", "100000001",
                     "100000000", "99999999999999999999"]),
    st.integers(0, 3).map(str),
)  # fmt: skip
group = st.sampled_from(["@*", f"@{HOST}", f"@{HOST.split('.')[0]}", "@other", f"@other,{HOST}",
                         "@", "@*,other", "# a comment", "#"])  # fmt: skip
step_body = st.lists(st.one_of(group, rank_token.map(lambda r: ("rank", r))), max_size=10)


def _names_host(names: str) -> bool:
    """tb_step.c names_host: an item of the list is the host's name or its short name."""
    return any(n in (HOST, HOST.split(".")[0]) for n in names.split(","))


def _expected(header: str, body: list[object], rank: int) -> str | None:
    """docs/step-file.md's rules: the X value of the rank's line, None for no line, or
    'error' (a malformed line, or the rank's line twice in the groups that apply)."""
    if header not in HEADERS:
        return "error"
    in_any, host_group = True, False
    own: list[str] = []
    anyl: list[str] = []
    for i, item in enumerate(body):
        if isinstance(item, str):
            if item.startswith("@"):
                in_any = item[1:] == "*"
                in_own = not in_any and _names_host(item[1:])
                host_group |= in_own
            continue
        token = item[1]  # type: ignore[index]
        if not (token.isascii() and token.isdigit() and int(token) <= MAX_RANK):
            return "error"
        if int(token) == rank:
            (own if not in_any and in_own else anyl if in_any else []).append(f"L{i}")
    chosen = own if host_group else anyl
    return "error" if len(chosen) > 1 else chosen[0] if chosen else None


@pytest.mark.skipif(not RANKEXEC.exists(), reason="make kernels")
@fuzz(80)
@given(header=st.sampled_from([*HEADERS, "topobind-rankexec 4", "x"]), body=step_body,
       rank=st.integers(0, 1))  # fmt: skip
@example(header=HEADERS[2], body=["@*", ("rank", "0"), ("rank", "0")], rank=0)
@example(header=HEADERS[2], body=["@*", ("rank", "0"), "@*", ("rank", "0")], rank=0)
@example(header=HEADERS[2], body=[f"@{HOST}", ("rank", "0"), "@*", ("rank", "0")], rank=0)
@example(header=HEADERS[2], body=["@*", ("rank", "+0")], rank=0)
@example(header=HEADERS[2], body=["@*", ("rank", "1"), ("rank", "1"), ("rank", "0")], rank=0)
def test_a_step_file_gives_a_rank_one_line_or_one_error(
    tmp_path_factory: pytest.TempPathFactory, header: str, body: list[object], rank: int
) -> None:
    """rankexec against the rules of docs/step-file.md: the rank's one line (in its host's
    groups, else the @* groups), 'plans no local rank', or one error line, exit 125 and the
    program not run: a rank twice where it applies, a line that does not start with plain
    digits ('+0', '-1', ' 0'), a rank over the bound."""
    lines = [item if isinstance(item, str) else f"{item[1]}\tX=L{i}" for i, item in enumerate(body)]
    step = tmp_path_factory.mktemp("step") / "step.txt"
    step.write_text("\n".join([header, *lines]) + "\n")
    step.chmod(0o600)
    env = {"PATH": os.environ["PATH"], "OMPI_COMM_WORLD_LOCAL_RANK": str(rank)}
    out = subprocess.run([str(RANKEXEC), str(step), "sh", "-c", 'printf "%s" "$X"'],
                         capture_output=True, text=True, timeout=30, env=env)  # fmt: skip
    want = _expected(header, body, rank)
    if want is None or want == "error":
        assert out.returncode == 125 and out.stdout == "", (want, out)
        assert out.stderr.startswith("topobind rankexec: error: ") and out.stderr.count("\n") == 1
        assert ("plans no local rank" in out.stderr) == (want is None), (lines, out.stderr)
        return
    assert (out.returncode, out.stdout, out.stderr) == (0, want, ""), (lines, out)


# ----------------------------------------------------------------- Slurm's core list
core_list = st.one_of(
    st.lists(st.one_of(st.integers(0, 40).map(str),
                       st.tuples(st.integers(0, 40), st.integers(0, 40)).map(
                           lambda t: f"{t[0]}-{t[1]}")), min_size=1, max_size=5).map(",".join),
    st.text(alphabet="0123456789,- x\u0660", max_size=14),
    st.sampled_from(["0-99999999999", "0-999999999", "", ",", "1,", "٣"]),
)  # fmt: skip


@fuzz(200)
@given(text=core_list, ncores=st.integers(1, 32))
def test_slurm_core_lists(text: str, ncores: int) -> None:
    """spank_step.core_ids (the plugin's --slurm-cores): the cores of the list, each on the
    node, or one TopobindError line; a huge range is refused before it is built."""
    from topobind.errors import TopobindError
    from topobind.launch.spank_step import core_ids

    want: list[int] | None = []
    if not re.fullmatch(r"\d{1,9}(-\d{1,9})?(,\d{1,9}(-\d{1,9})?)*", text):
        want = None
    else:
        for part in text.split(","):
            a, _, b = part.partition("-")
            lo, hi = int(a), int(b or a)
            if lo > hi or hi >= ncores:
                want = None
                break
            want += range(lo, hi + 1)  # type: ignore[operator]
    if want is None:
        with pytest.raises(TopobindError) as err:
            core_ids(text, ncores)
        assert "\n" not in str(err.value) and str(err.value).startswith("--slurm-cores ")
    else:
        assert core_ids(text, ncores) == want


# ------------------------------------------------- the step file's bytes: control bytes, long lines
CONTROL = [chr(c) for c in range(0x20) if c not in (9, 10)] + ["\x7f"]
clean_text = st.text(alphabet="abcXYZ019=_,-%{}/ é\t", max_size=30)


def _position(text: str, at: int) -> tuple[int, int]:
    """The 1-based line and column (in bytes) of the character at ``at``."""
    before = text[:at].encode()
    return before.count(b"\n") + 1, len(before) - (before.rfind(b"\n") + 1) + 1


@pytest.mark.skipif(not RANKEXEC.exists(), reason="make kernels")
@fuzz(80)
@given(
    value=clean_text,
    byte=st.sampled_from(CONTROL),
    where=st.integers(0, 200),
    filler=st.integers(0, 3000),
)
@example(value="1", byte="\x00", where=21, filler=0)  # 0<NUL><TAB>%cpus=... (issue 47)
@example(value="a\x00b", byte="\x00", where=10**6, filler=0)  # X=a<NUL>b: %mem= was dropped
@example(value="1", byte="\r", where=10**6, filler=0)  # a DOS line ending
def test_a_control_byte_anywhere_is_refused_with_its_line_and_column(
    tmp_path_factory: pytest.TempPathFactory, value: str, byte: str, where: int, filler: int
) -> None:
    """Issue 47: `0<NUL><TAB>%cpus=1<TAB>X=1` ran the rank unbound with exit 0 (the NUL ended
    the line). Any byte 0x00-0x1f but TAB and newline, or 0x7f, anywhere in the file (header,
    group, rank, name, value; a line of thousands of fields): one line naming the file, the
    line and the column, exit 125, the program not run. Without it the line applies."""
    tmp = tmp_path_factory.mktemp("bytes")
    pad = "".join(f"\tP{i}=v" for i in range(filler))  # a long line
    text = f"topobind-rankexec 3\n@*\n0\t%thp=off\tX={value}{pad}\tY=end\n"
    at = min(where, len(text) - 1)
    bad = text[:at] + byte + text[at:] if "\x00" not in value else text
    first = next(i for i, c in enumerate(bad) if c in CONTROL)
    step = tmp / "step.txt"
    step.write_bytes(bad.encode())
    step.chmod(0o600)
    out = subprocess.run(
        [str(RANKEXEC), str(step), "sh", "-c", 'echo "$Y"'],
        capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    line, column = _position(bad, first)
    assert out.returncode == 125 and out.stdout == "", out
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(
        f"topobind rankexec: error: {step}: line {line}, column {column}: control byte "
        f"0x{ord(bad[first]):02x}"
    ), out.stderr


@pytest.mark.skipif(not RANKEXEC.exists(), reason="make kernels")
@fuzz(15)
@given(count=st.integers(1, 3000), size=st.integers(0, 20000), clean=clean_text)
@example(count=1, size=200_000, clean="x")
def test_long_lines_and_long_values_apply_whole(
    tmp_path_factory: pytest.TempPathFactory, count: int, size: int, clean: str
) -> None:
    """A line of many fields or a value of many bytes, without a control byte: every
    variable reaches the program (the last of a name wins), nothing is cut; a value exec
    cannot pass (128 KiB a string) is one line, exit 126."""
    tmp = tmp_path_factory.mktemp("long")
    value = clean.replace("\t", "") + "v" * size
    names = [f"V{i % max(1, count // 2)}" for i in range(count)]  # repeated names
    fields = [f"{n}={i}" for i, n in enumerate(names)] + [f"BIG={value}"]
    step = tmp / "step.txt"
    step.write_text("topobind-rankexec 1\n@*\n0\t" + "\t".join(fields) + "\n")
    step.chmod(0o600)
    out = subprocess.run(
        [str(RANKEXEC), str(step), "env"], capture_output=True, text=True, timeout=60,
        env={"PATH": os.environ["PATH"], "V0": "old"},
    )  # fmt: skip
    if len(f"BIG={value}".encode()) >= 128 * 1024:  # MAX_ARG_STRLEN: exec refuses it
        assert out.returncode == 126 and out.stderr.count("\n") == 1, out
        assert "Argument list too long (a variable over 128 KiB" in out.stderr
        return
    assert out.returncode == 0, out.stderr
    env = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    last = {n: str(i) for i, n in enumerate(names)}
    assert {n: env.get(n) for n in last} == last
    assert env["BIG"] == value and out.stdout.count("\nV0=") + out.stdout.startswith("V0=") == 1
