"""The command layer: one argparse parser, every command's help, one-line errors, and a plan
whose start-up loads none of the heavy libraries only other commands need."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from paths import TOPOLOGIES

from topobind.cli import main as cli

XML = str(TOPOLOGIES / "192em64t-24n8c2t.xml")


def _commands() -> list[list[str]]:
    """Every command and nested subcommand, as argv prefixes."""
    nested = {"spack": ["check", "externals"], "site": ["list", "check"]}
    out: list[list[str]] = []
    for name in cli.COMMANDS:
        out.append([name])
        out.extend([name, sub] for sub in nested.get(name, []))
    return out


def test_the_command_table_names_every_command_of_the_parser() -> None:
    """COMMANDS (which module declares a command) lists exactly the parser's commands."""
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.dest == "topobind_command")
    assert sorted(action.choices) == sorted(cli.COMMANDS)


@pytest.mark.parametrize("argv", _commands(), ids=" ".join)
def test_every_command_prints_its_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert out.startswith(f"usage: topobind {' '.join(argv)}")


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert all(f"    {name}" in out for name in cli.COMMANDS)


def test_no_command_prints_the_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["plann"], "invalid choice: 'plann'"),
        (["plan", "-t", XML], "the following arguments are required: --layout/-l"),
        (["plan", "-l", "compact", "--ranks", "x"], "--ranks"),
        (["show", "--format", "yaml"], "invalid choice: 'yaml'"),
    ],
)
def test_bad_command_lines_are_one_line_errors(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.count("\n") == 1 and err.startswith("topobind: error: ") and says in err
    assert "--help'" in err


@pytest.mark.slow
def test_plan_start_up_imports_no_drawing_schema_or_reframe_library() -> None:
    """A job script's 'topobind plan -f json' loads what a plan needs and nothing of the
    report, the drawings, the checks or the schema validator."""
    code = (
        "import io, sys\n"
        "from topobind.cli.main import main\n"
        "out, sys.stdout = sys.stdout, io.StringIO()\n"
        f"status = main(['plan', '-t', {XML!r}, '-l', 'spread', '-r', '8', '-f', 'json'])\n"
        "sys.stdout = out\n"
        "heavy = ('matplotlib', 'numpy', 'jsonschema', 'yaml', 'reframe', 'topobind.report')\n"
        "print(status, *sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
        "    or m.startswith('topobind.report')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "-t", XML, "-l", "spread", "-r", "8", "-f", "json"],
        ["show", "-t", XML, "-f", "json"],
        ["env", "-t", XML, "-l", "spread", "-r", "8"],
    ],
)
def test_job_script_commands_import_no_dataclasses_and_compile_nothing(argv: list[str]) -> None:
    """plan, show and env (issue 28's start-up budget): ``dataclasses`` imports ``inspect``
    and compiles every class's methods, typing compiles each forward reference of a
    NamedTuple field, and the process's first ``compile`` builds every AST type: none of it
    on these paths. A module's own source (``FILE.py``) compiled on import is left out: an
    installed package has its bytecode, a fresh checkout under PYTHONDONTWRITEBYTECODE=1 not."""
    code = (
        "import builtins, io, sys\n"
        "compiled = []\n"
        "real = builtins.compile\n"
        "def spy(source, *args, **kwargs):\n"
        "    name = args[0] if args else kwargs.get('filename', '')\n"
        "    if not str(name).endswith('.py'):\n"
        "        compiled.append(str(source)[:60])\n"
        "    return real(source, *args, **kwargs)\n"
        "builtins.compile = spy\n"
        "from topobind.cli.main import main\n"
        "out, sys.stdout, sys.stderr = sys.stdout, io.StringIO(), io.StringIO()\n"
        f"status = main({argv!r})\n"
        "sys.stdout = out\n"
        "print(status, *sorted({'dataclasses', 'inspect'} & set(sys.modules)), *compiled)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0"]


@pytest.mark.slow
def test_python_dash_m_topobind_is_the_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "topobind", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.startswith("topobind 0.1.0\nsites: "), out.stdout


@pytest.mark.slow
def test_a_reader_that_leaves_early_is_no_error() -> None:
    """'topobind plan | true': the reader is gone before the plan is printed; exit 0, no
    traceback."""
    out = subprocess.run(
        [
            "bash",
            "-c",
            f"{sys.executable} -m topobind plan -t {XML} -l spread -r 192 -f json | true; "
            "echo ${PIPESTATUS[0]}",
        ],
        capture_output=True,
        text=True,
    )
    assert (out.stdout, out.stderr) == ("0\n", "")


@pytest.mark.parametrize("columns", [None, "", "abc", "0", "-3", "50", "132"])
def test_help_width_is_shutils(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parsers' width (:func:`terminal_columns`, which imports no shutil at start-up) is
    the one argparse's own formatter takes: ``shutil.get_terminal_size().columns``."""
    import shutil

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert cli.terminal_columns() == shutil.get_terminal_size().columns
    parser = cli.build_parser(("topobind.cli.commands.topo",))
    ours = parser._subparsers._group_actions[0].choices["plan"].format_help()
    plain = cli.build_parser(("topobind.cli.commands.topo",))
    sub = plain._subparsers._group_actions[0].choices["plan"]
    sub.formatter_class = argparse.RawDescriptionHelpFormatter
    assert ours == sub.format_help()


@pytest.mark.parametrize(
    "value,text",
    [
        ({"a": [1, 2], "b": {"c": "é"}}, '{\n "a": [1, 2],\n "b": {\n  "c": "\\u00e9"\n }\n}'),
        ({"x": 1.5, "y": [1, 2.5], "z": [[1], [2, 3]]},
         '{\n "x": 1.5,\n "y": [1, 2.5],\n "z": [[1], [2, 3]]\n}'),
        ([{"k": None}, {}], '[\n {\n  "k": null\n },\n {}\n]'),
    ],
)  # fmt: skip
def test_plan_json_text(value: object, text: str) -> None:
    """jsonfmt (every ``-f json``): objects indented, numbers' lists on one line, floats by
    json's own encoder (imported only for them), strings by json's escaper."""
    from topobind import jsonfmt

    assert jsonfmt.dumps(value) == text


@pytest.mark.usefixtures("built_kernels")  # a fresh clone has none built
def test_verify_runs_through_the_entry_point_without_a_traceback() -> None:
    """``verify -- CMD`` has a positional named ``command``: the entry point's start-up policy
    (gc for the bounded commands) must read the subcommand's name from its own attribute, not
    from ``args.command`` (a list here: ``TypeError: unhashable type`` before)."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from topobind.cli.main import entry; sys.exit(entry())",
         "verify", "--", "true"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().startswith("topobind: error: the placement probe reported nothing")


@pytest.mark.parametrize(
    ("argv", "module", "function"),
    [
        (["site", "list"], "site", "run_list"),
        (["site", "check", "local"], "site", "run_check"),
        (["spack", "check"], "spack", "run_check"),
        (["spack", "externals"], "spack", "run_externals"),
    ],
)
def test_each_subcommand_of_a_group_is_run_by_its_own_function(
    argv: list[str], module: str, function: str
) -> None:
    import importlib

    args = cli.build_parser().parse_args(argv)
    commands = importlib.import_module(f"topobind.cli.commands.{module}")
    assert args.func is getattr(commands, function)
