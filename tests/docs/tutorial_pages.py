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


def script(todo: list[Step], home: Path) -> str:
    """One bash script: each command after a marker line, files written in page order."""
    lines = ["cd ~"]
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
        lines.append(f"tb_rc=$?; printf '\\n{MARK} {i}\\n'; (exit $tb_rc)")
        lines.append(text)
    lines.append(f"printf '\\n{MARK} end\\n'")
    return "\n".join(lines) + "\n"


def run(todo: list[Step], home: Path, env: dict[str, str], timeout: float) -> dict[int, str]:
    """{step index: its output as a user sees it} of the commands in ``todo``."""
    done = subprocess.run(
        ["bash", "-c", script(todo, home)],
        env=dict(env, HOME=str(home), PYTHONUNBUFFERED="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    parts = re.split(rf"\n{MARK} (\w+)\n", "\n" + done.stdout)
    assert parts[-2:] == ["end", ""], f"the page's shell stopped early:\n{done.stdout[-3000:]}"
    got: dict[int, str] = {}
    for key, text in zip(parts[1::2], parts[2::2], strict=True):
        if key != "end":
            got[int(key)] = user_paths(text.replace(str(home), "~"), REPO)
    return got


#: what depends on the machine or the moment, masked in both outputs
MASKS = (
    (re.compile(r"/[0-9a-f]{8}\b"), "/HASH"),  # ReFrame's test hashes
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
