"""topobind.quickargs parses show and plan command lines as argparse does, or leaves them to
argparse. Data-driven: each line below is parsed by both and the results compared."""

from __future__ import annotations

import subprocess
import sys

import pytest
from topo_sources import TOPOLOGIES

from topobind import quickargs
from topobind.cli import build_parser

XML = str(TOPOLOGIES / "fakecpukinds.xml")

#: lines quickargs must take, and give exactly what argparse gives
TAKEN = [
    ["plan", "-l", "compact"],
    ["plan", "--layout", "spread", "--ranks", "4", "--threads", "2", "--smt"],
    ["plan", "--layout=per-l3", "--format=json", "-t", "betzy-epyc7742"],
    ["plan", "-l", "l3-groups:2", "-f", "openmpi", "--rankfile", "/tmp/x.rf", "--force"],
    ["plan", "-l", "per-gpu", "--gpus-per-rank", "2", "--reserve", "first-core-per-l3"],
    ["plan", "-l", "per-gpu", "--order", "cpu", "--cpukind", "all", "--host", "node01"],
    ["plan", "-l", "compact", "-r", "2", "-r", "3"],  # repeated: the last one
    ["plan", "-l", "every-other-core", "-t", XML, "-f", "rankfile4"],
    ["plan", "-t", "synthetic:pack:2 core:2 pu:2", "-l", "compact", "-f", "picture"],
    ["show"],
    ["show", "-t", XML, "--format", "json"],
]

#: lines quickargs leaves to argparse (which parses them or says what is wrong)
LEFT = [
    ["plan"],  # --layout is required
    ["plan", "--lay", "compact"],  # an abbreviation
    ["plan", "-l", "compact", "--help"],
    ["plan", "-lcompact"],  # a value attached to a short option
    ["plan", "-l", "compact", "-r", "0"],  # a bad count
    ["plan", "-l", "compact", "-r", "-1"],  # a value that starts with '-'
    ["plan", "-l", "compact", "-f", "yaml"],  # not a choice
    ["plan", "-l", "compact", "--smt=1"],
    ["plan", "-l", "compact", "--", "x"],
    ["plan", "-l", "compact", "extra"],
    ["plan", "-l"],
    ["plan", "-l", "compact", "--host", "bad host"],
    ["show", "--nope"],
]


def _argparse(argv: list[str], module: str = "topobind.commands.topo") -> dict[str, object]:
    return vars(build_parser(module).parse_args(argv))


@pytest.mark.parametrize("argv", TAKEN, ids=" ".join)
def test_taken_lines_parse_as_argparse(argv: list[str]) -> None:
    quick = quickargs.parse(argv, "topobind.commands.topo")
    assert quick is not None
    assert vars(quick) == _argparse(argv)


@pytest.mark.parametrize("argv", LEFT, ids=" ".join)
def test_other_lines_go_to_argparse(argv: list[str]) -> None:
    assert quickargs.parse(argv, "topobind.commands.topo") is None


def test_commands_with_positionals_are_left_to_argparse() -> None:
    """run and verify take a program after '--': argparse parses their lines; env's options
    alone are parsed as argparse does."""
    module = "topobind.commands.run"
    assert quickargs.parse(["run", "-l", "compact", "--", "true"], module) is None
    assert quickargs.parse(["verify", "-l", "compact", "--", "srun"], module) is None
    env = ["env", "-l", "compact", "-r", "2"]
    assert vars(quickargs.parse(env, module) or {}) == _argparse(env, module)


def test_plan_imports_no_argparse_re_or_etree() -> None:
    """What keeps 'topobind plan' within 3x hwloc-distrib (make bench-plan): a plan printed
    as JSON imports none of these modules."""
    code = (
        "import sys, io\n"
        "from topobind.cli import main\n"
        "out, sys.stdout = sys.stdout, io.StringIO()\n"
        f"status = main(['plan', '-t', {XML!r}, '-l', 'compact', '-f', 'json'])\n"
        "sys.stdout = out\n"
        "heavy = ('argparse', 're', 'dataclasses', 'typing', 'xml.etree.ElementTree', 'json')\n"
        "print(status, ' '.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0"]
