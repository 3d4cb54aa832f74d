"""Run a tutorial page top to bottom in one shell and compare its output with the page's.

Used by tests/docs/test_docs_tutorials.py for "Accepting new nodes" and "topobind in your
ReFrame CI" (docs/tutorials/). A page marks each block with an HTML comment before it:

- ``<!-- tutorial: file PATH -->``: the block is written to ``~/PATH``
  (``/path/to/topobind`` being this checkout); ``append PATH`` appends it;
- ``<!-- tutorial: KIND -->`` over a console block: its ``$`` commands run, in page order,
  in one bash session (exports and ``cd`` carry over), HOME a temporary folder. KIND says
  which test runs it: ``run`` (every part), ``local`` (the part without a cluster),
  ``cluster`` (the part on the local 3-node Slurm cluster).

Outputs are compared in the parts that do not depend on the machine (:func:`normalize`):
numbers, host names, hashes, dates, column widths and the figure that happened to be worst
are masked; a line ``...`` on the page stands for any lines (ReFrame's progress, the rows a
page leaves out).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
from docpaths import user_paths  # noqa: E402

BLOCK = re.compile(r"<!-- tutorial: (\S+)(?: (\S+))? -->\n```\w*\n(.*?)```\n", re.S)
MARK = "\x1etb-tutorial-step"
START = "cd /path/to/topobind && scripts/local-slurm start --nodes 3"


@dataclass
class Step:
    kind: str  # file, append, run, local, cluster
    arg: str | None  # the file of file/append
    text: str  # the file's text, or the command
    shown: list[str]  # the page's output lines of a command


def steps(page: Path) -> list[Step]:
    out: list[Step] = []
    for m in BLOCK.finditer(page.read_text()):
        kind, arg, body = m[1], m[2], m[3]
        if kind in ("file", "append"):
            out.append(Step(kind, arg, body, []))
            continue
        for line in body.splitlines():
            if line.startswith("$ "):
                out.append(Step(kind, None, line[2:], []))
            else:
                assert out and out[-1].kind == kind, f"output before a command: {line}"
                out[-1].shown.append(line)
    return out


def script(todo: list[Step], home: Path, cwd: Path | None = None) -> str:
    """One bash script: each command after a marker line, files written in page order."""
    lines = [f"cd {shlex.quote(str(cwd))}" if cwd else "cd ~"]
    for i, s in enumerate(todo):
        text = s.text.replace("/path/to/topobind", str(REPO))
        if s.kind in ("file", "append"):
            assert s.arg and not s.arg.startswith("/"), s.arg
            target = home / s.arg
            op = ">" if s.kind == "file" else ">>"
            lines.append(f"mkdir -p {shlex.quote(str(target.parent))}")
            lines.append(f"cat {op} {shlex.quote(str(target))} <<'TB_TUTORIAL_EOF'\n{text}"
                         "TB_TUTORIAL_EOF")  # fmt: skip
            continue
        if s.text == START:
            text = f"cd {shlex.quote(str(REPO))}"  # the fixture started the cluster
        # the marker keeps $? of the command before it (the page's "echo $?")
        lines.append(f"tb_rc=$?; printf '\\n{MARK} {i} %d\\n' $tb_rc; (exit $tb_rc)")
        lines.append(text)
    lines.append(f"printf '\\n{MARK} end %d\\n' $?")
    return "\n".join(lines) + "\n"


def run(todo: list[Step], home: Path, env: dict[str, str], timeout: float) -> dict[int, str]:
    """{step index: its output as a user sees it} of the commands in ``todo``."""
    return run_with_status(todo, home, env, timeout)[0]


def run_with_status(
    todo: list[Step],
    home: Path,
    env: dict[str, str],
    timeout: float,
    cwd: Path | None = None,
    typed: bool = False,
) -> tuple[dict[int, str], dict[int, int]]:
    """({step index: its output as a user sees it}, {step index: its exit status}).

    ``typed``: the script goes to bash's standard input, as if typed, so a command that opens
    a shell (``scripts/flux-start --test-size=1``) runs the page's next commands inside it."""
    text = script(todo, home, cwd)
    done = subprocess.run(
        ["bash", "-s"] if typed else ["bash", "-c", text],
        input=text if typed else "",
        env=dict(env, HOME=str(home), PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    # each marker carries the exit status of the step before it
    parts = re.split(rf"\n{MARK} (\w+) (\d+)\n", "\n" + done.stdout)
    assert parts[-3:-1] == ["end", parts[-2]] and parts[-1] == "", (
        f"the page's shell stopped early:\n{done.stdout[-3000:]}"
    )
    got: dict[int, str] = {}
    status: dict[int, int] = {}
    keys, rcs, texts = parts[1::3], parts[2::3], parts[3::3]
    for n, (key, text) in enumerate(zip(keys, texts, strict=True)):
        if key != "end":
            got[int(key)] = user_paths(text.replace(str(home), "~"), REPO)
            status[int(key)] = int(rcs[n + 1])
    return got, status


#: what depends on the machine or the moment, masked in both outputs
MASKS = (
    (re.compile(r"/[0-9a-f]{8}\b"), "/HASH"),  # ReFrame's test hashes
    (re.compile(r"ƒ\w+"), "JOBID"),  # Flux's job ids
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f-]{27}\b"), "UUID"),  # ReFrame's session UUIDs
    (re.compile(r"(Started|Finished) on .*"), r"\1 on DATE"),
    (re.compile(r"THP \w+ \(defrag \w+\)"), "THP MODE"),
    (re.compile(r"\.(copy|scale|add|triad)\b"), ".FIGURE"),  # the worst figure of a node
    (re.compile(r"\b\d{8}T\d{6}Z\b"), "TIME"),  # the UTC time in a report's name
    (re.compile(r"\b\d+:\d\d(:\d\d)?\b"), "TIME"),  # durations and clock times
    (re.compile(r"[+-]inf\b"), "N%"),  # an open bound (a busy calibration), or a percentage
    (re.compile(r"\bNone\b"), "N"),  # ReFrame's open bound (u:None), or a number
    (re.compile(r"(?<![A-Za-z])[+-]?\d[\d,.]*"), "N"),  # node2 keeps its name
    (re.compile(r"-{2,}"), "--"),
)


#: srun's lines when a step waits for the last one's CPUs to be released (a busy machine): a
#: moment's state of the cluster, not the command's output
SRUN_WAITED = re.compile(
    r"srun: (Job \d+ step creation temporarily disabled, retrying.*|Step created for job \d+)"
)

#: srun's own line on a task's exit status: srun prints it when the exit message comes, which
#: races with the task's last output forwarded through slurmstepd (a busy machine printed it
#: before the task's error lines): compared after the output, in its own order
SRUN_EXITED = re.compile(r"srun: error: [\w.-]+: tasks? [\d,-]+: Exited with exit code \d+")


def normalize(lines: list[str], hosts: tuple[str, ...]) -> list[str]:
    exited = [ln for ln in lines if SRUN_EXITED.fullmatch(ln.strip())]
    lines = [ln for ln in lines if not SRUN_EXITED.fullmatch(ln.strip())] + exited
    out: list[str] = []
    for line in lines:
        if SRUN_WAITED.fullmatch(line.strip()):
            continue
        for host in hosts:
            line = re.sub(rf"(?<![\w-]){re.escape(host)}(?![\w-])", "HOST", line)
        for pattern, repl in MASKS:
            line = pattern.sub(repl, line)
        line = " ".join(line.split())
        if line or (out and out[-1] != ""):
            out.append(line)
    while out and out[-1] == "":
        out.pop()
    return out


def matches(shown: list[str], got: list[str]) -> bool:
    """``got`` is ``shown`` where each ``...`` line of ``shown`` stands for any lines."""
    segments: list[list[str]] = [[]]
    for line in shown:
        if line == "...":
            segments.append([])
        else:
            segments[-1].append(line)
    if len(segments) == 1:
        return got == shown
    first, *middle, last = segments
    if got[: len(first)] != first or (last and got[-len(last) :] != last):
        return False
    at, end = len(first), len(got) - len(last)
    if at > end:
        return False
    for seg in middle:
        while at + len(seg) <= end and got[at : at + len(seg)] != seg:
            at += 1
        if at + len(seg) > end:
            return False
        at += len(seg)
    return True


#: how-to pages (issue 48): every ``console`` and ``sh`` block runs, in page order, unless an
#: HTML comment before it says otherwise: ``<!-- docs-test: skip REASON -->`` (not run, listed
#: with its reason), ``<!-- docs-test: KIND [REASON] -->`` (run by the test of that kind:
#: ``status``, exit statuses only, the page showing another machine's output; ``cluster``, on
#: the local 3-node cluster; ``flux``, where ``make flux`` built Flux), ``<!-- docs-test:
#: file NAME -->`` (the block written to ~/NAME); a block under ``<!-- tutorial: ... -->``
#: is run by the tutorial tests.
HOWTO_MARK = re.compile(r"<!-- (docs-test|tutorial): (\S+)(?: (.*?))? -->\n *\Z")  # ends before
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```\n", re.S | re.M)  # in a list item too


@dataclass
class Block:
    page: Path
    line: int  # of its opening fence
    lang: str
    body: str
    kind: str  # run, status, cluster, flux, skip, file, tutorial
    note: str  # the reason of a skip, the file of a file block

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    """The page's console and sh blocks (and its marked file blocks), in page order."""
    text = page.read_text()
    out: list[Block] = []
    for m in FENCE.finditer(text):
        before = text[: m.start()] + m[1]
        mark = HOWTO_MARK.search(before[-300:])
        kind, note = "run", ""
        if mark:
            kind = "tutorial" if mark[1] == "tutorial" else mark[2]
            note = mark[3] or ""
        if m[2] not in ("console", "sh") and kind not in ("file", "tutorial"):
            continue
        body = "".join(ln.removeprefix(m[1]) for ln in m[3].splitlines(keepends=True))
        out.append(Block(page, before.count("\n") + 1, m[2], body, kind, note))
    return out


def block_steps(block: Block) -> list[Step]:
    """A block's commands: a console block's ``$`` lines (with their ``\\`` continuations)
    and the output the page shows under each; every line of an sh block."""
    if block.kind == "file":
        return [Step("file", block.note, block.body, [])]
    out: list[Step] = []
    going_on = False
    for line in block.body.splitlines():
        if going_on:
            out[-1].text += "\n" + line
        elif block.lang == "console" and line.startswith("$ "):
            out.append(Step(block.kind, None, line[2:], []))
        elif block.lang == "sh" and line.strip() and not line.lstrip().startswith("#"):
            out.append(Step(block.kind, None, line, []))
        elif block.lang == "console":
            assert out, f"{block.where}: output before a command: {line}"
            out[-1].shown.append(line)
        going_on = line.endswith("\\") and bool(out)
    return out


def may_fail(steps: list[Step], i: int) -> bool:
    """A command the page shows failing: its output says error (``error:``, Flux's
    ``ERROR:``), or ``echo $?`` follows."""
    following = steps[i + 1].text if i + 1 < len(steps) else ""
    return "echo $?" in following or any("error:" in ln.lower() for ln in steps[i].shown)
