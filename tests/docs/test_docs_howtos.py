"""Every tutorial and how-to runs as written, and the README (issue 48 item 2): the pages'
own ``console`` and ``sh`` blocks, their ``$`` commands in page order in one bash session in
this checkout (HOME a temporary folder, ``.venv/bin`` on PATH as ``make setup`` says), each
command's exit status checked (0 unless the page shows it failing: an ``error:`` line, or
``echo $?`` after it) and its output compared with the page's in the parts that do not
depend on the machine (tests/docs/tutorial_pages.py: the masks, ``...`` for any lines).

A block that cannot run here says why on the page, in an HTML comment before it
(``<!-- docs-test: skip REASON -->``); ``test_skipped_blocks_are_listed`` reports each with
its reason (``pytest -rs``), so nothing is skipped silently. tutorial_pages.py lists the
other marks (``status``, ``cluster``, ``flux``, ``file NAME``)."""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

import pytest
import tutorial_pages as tp
from paths import REPO
from slurm_helpers import SlurmCluster, slurm_cluster3  # noqa: F401  (fixture)

PAGES = [REPO / "README.md"] + [
    REPO / "docs" / name
    for name in ("new-rack.md", "flux.md", "site-admins.md", "install.md",
                 "tutorials/first-bound-job.md", "tutorials/find-best-placement.md")
]  # fmt: skip
KINDS = {"run", "status", "cluster", "flux", "skip", "file", "tutorial"}
FLUX = REPO / "build" / "flux" / "bin" / "flux"


def _all_blocks() -> list[tp.Block]:
    return [b for page in PAGES for b in tp.page_blocks(page)]


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "TOPOBIND_", "PYTEST_", "FLUX_", "MAKE", "MFLAGS"))
    }  # fmt: skip  (a user's shell, not make test's: make prints its level otherwise)
    env["PATH"] = f"{Path(sys.executable).parent}:{REPO / 'launchers'}:{env.get('PATH', '')}"
    return env


def test_every_block_is_run_or_marked_with_a_reason() -> None:
    blocks = _all_blocks()
    assert {b.page for b in blocks} == set(PAGES)
    for b in blocks:
        assert b.kind in KINDS, f"{b.where}: unknown mark {b.kind!r}; one of {sorted(KINDS)}"
        if b.kind == "skip":
            assert len(b.note.split()) >= 3, f"{b.where}: a skip needs its reason"
        if b.kind != "tutorial":
            assert tp.block_steps(b), f"{b.where}: a block with no command"


def test_page_blocks_reads_marks_commands_and_continuations(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "<!-- docs-test: skip needs a real rack -->\n```console\n$ a\nout\n```\n\n"
        "```sh\nb --x \\\n  --y   # two lines\n# a comment\n```\n"
        "```yaml\nnot: a command\n```\n"
        "1. In a list:\n\n   <!-- docs-test: skip a file of your own -->\n   ```console\n"
        "   $ c\n   out c\n   ```\n"
    )
    first, second, third = tp.page_blocks(page)
    assert (third.kind, third.note) == ("skip", "a file of your own")
    assert [(s.text, s.shown) for s in tp.block_steps(third)] == [("c", ["out c"])]
    assert (first.kind, first.note, first.line) == ("skip", "needs a real rack", 2)
    assert [(s.text, s.shown) for s in tp.block_steps(first)] == [("a", ["out"])]
    assert second.kind == "run"
    assert [s.text for s in tp.block_steps(second)] == ["b --x \\\n  --y   # two lines"]


def test_may_fail_only_where_the_page_shows_a_failure() -> None:
    shown = ([], ["1"], ["topobind: error: no"], [])
    steps = [
        tp.Step("run", None, c, out)
        for c, out in zip(["a", "echo $?", "b", "c"], shown, strict=True)
    ]
    assert [tp.may_fail(steps, i) for i in range(4)] == [True, False, True, False]


@pytest.mark.parametrize(
    "block", [b for b in _all_blocks() if b.kind == "skip"], ids=lambda b: b.where
)
def test_skipped_blocks_are_listed(block: tp.Block) -> None:
    pytest.skip(f"{block.where}: {block.note}")


def _check(kinds: set[str], page: Path, home: Path, env: dict[str, str],
           hosts: tuple[str, ...], timeout: float, typed: bool = False) -> int:  # fmt: skip
    """Runs the page's blocks of ``kinds`` (and its file blocks) in order; the commands run."""
    todo: list[tp.Step] = []
    for b in tp.page_blocks(page):
        if b.kind in kinds or b.kind == "file":
            todo += tp.block_steps(b)
    if typed:  # a shell the page opens (Flux's needs a tty): bash reading the next commands
        todo = [s if s.kind == "file" else tp.Step(s.kind, s.arg, _shell_of(s.text), s.shown)
                for s in todo]  # fmt: skip
    commands = [i for i, s in enumerate(todo) if s.kind != "file"]
    if not commands:
        return 0
    got, status = tp.run_with_status(todo, home, env, timeout, cwd=REPO, typed=typed)
    for i in commands:
        s = todo[i]
        if s.text == tp.START:
            continue
        assert status[i] == 0 or tp.may_fail(todo, i), (
            f"{page.name}: $ {s.text}\nexit status {status[i]}\n{got[i][-3000:]}"
        )
        if s.kind in ("run", "cluster", "flux") and s.shown:
            shown = tp.normalize(s.shown, hosts)
            seen = tp.normalize(got[i].splitlines(), hosts)
            if s.kind == "flux" and "..." not in shown:  # the shell's and the job's lines race
                shown, seen = sorted(shown), sorted(seen)
            assert tp.matches(shown, seen), f"{page.name}: $ {s.text}\n--- got:\n{got[i]}"
    return len(commands)


OPENS_SHELL = re.compile(r"(.*\bscripts/flux-start(?: --test-size=\d+)?)(?:\s+#.*)?")


def _shell_of(command: str) -> str:
    """``scripts/flux-start --test-size=1`` opens an interactive shell in the instance: typed
    into bash, it is ``... bash -s``, which reads the page's next commands as a user types
    them (flux start refuses an interactive shell without a tty)."""
    m = OPENS_SHELL.fullmatch(command)
    # any other command reads no standard input: the page's next commands are there
    return f"{m[1]} bash -s" if m else f"{{ {command}\n}} </dev/null"


def test_a_shell_the_page_opens_reads_the_next_commands() -> None:
    assert (
        _shell_of("scripts/flux-start --test-size=1") == "scripts/flux-start --test-size=1 bash -s"
    )
    assert _shell_of("cd /x && scripts/flux-start --test-size=1   # an instance") == (
        "cd /x && scripts/flux-start --test-size=1 bash -s"
    )
    assert _shell_of("scripts/flux-start --test-size=3 topobind run -- true") == (
        "{ scripts/flux-start --test-size=3 topobind run -- true\n} </dev/null"
    )


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_runs_as_written(page: Path, tmp_path: Path, built_kernels: None) -> None:
    hosts = (socket.gethostname().split(".")[0],)
    if not _check({"run", "status"}, page, tmp_path, _env(), hosts, 900):
        pytest.skip(f"{page.name}: no block runs without a cluster or Flux (see the marks)")


@pytest.mark.slow
@pytest.mark.root
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_cluster_blocks_run_as_written(
    page: Path,
    tmp_path: Path,
    slurm_cluster3: SlurmCluster,  # noqa: F811
    built_kernels: None,
) -> None:
    if not any(b.kind == "cluster" for b in tp.page_blocks(page)):
        pytest.skip(f"{page.name}: no block on the local cluster")
    env = dict(_env(), TOPOBIND_SLURM_DIR=str(slurm_cluster3.state_dir))
    hosts = (socket.gethostname().split(".")[0],)
    _check({"cluster"}, page, tmp_path, env, hosts, 900)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_flux_blocks_run(page: Path, tmp_path: Path, built_kernels: None) -> None:
    if not any(b.kind == "flux" for b in tp.page_blocks(page)):
        pytest.skip(f"{page.name}: no block under Flux")
    if not FLUX.exists():
        pytest.skip(f"{page.name}: its Flux blocks need 'make flux' (no {FLUX})")
    hosts = (socket.gethostname().split(".")[0],)
    _check({"flux"}, page, tmp_path, _env(), hosts, 900, typed=True)
