"""The layering docs/architecture.md states: which folders of src/topobind may import which.

Every import of every module counts (inside functions too), read with ``ast``. A module
directly under src/topobind is in the base layer. A folder the rules do not know fails the
test: add it to LAYERS here and to docs/architecture.md (section 1) together.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from paths import REPO

SRC = REPO / "src"
PACKAGE = SRC / "topobind"

#: folder -> the folders its modules may import (their own folder and "base" always allowed)
LAYERS: dict[str, frozenset[str]] = {
    "base": frozenset(),
    "topo": frozenset(),
    "plan": frozenset({"topo"}),
    "emit": frozenset({"topo", "plan"}),
    "draw": frozenset({"topo", "plan"}),
    "measure": frozenset(),
    "launch": frozenset({"topo", "plan", "emit", "measure"}),
    "bench": frozenset({"topo", "plan", "emit", "measure", "launch"}),
    "validation": frozenset({"topo", "measure", "launch"}),
    "report": frozenset({"topo", "plan", "draw", "measure"}),
    "spack_driver": frozenset(),
    "tune": frozenset({"topo", "plan", "launch", "measure"}),
    "cli": frozenset(
        {
            "topo",
            "plan",
            "emit",
            "draw",
            "measure",
            "launch",
            "bench",
            "validation",
            "report",
            "spack_driver",
        }
        | {"tune"}
    ),
}

#: modules outside the rules: the package's own entry points
ENTRY_POINTS = frozenset({"topobind.__main__"})


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def folder_of(module: str) -> str:
    """``topobind.plan.layouts`` -> "plan"; ``topobind.errors`` (a module directly under the
    package) -> "base"."""
    parts = module.split(".")
    if len(parts) == 1:
        return "base"
    if len(parts) == 2 and (PACKAGE / f"{parts[1]}.py").is_file():
        return "base"
    return parts[1]


def imports_of(path: Path) -> set[str]:
    """The topobind modules ``path`` imports, anywhere in it (``from topobind.x import y``
    counts as topobind.x.y when that is a module)."""
    modules = _modules()
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "topobind")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] != "topobind":
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in modules else node.module)
    return out


def violations() -> list[str]:
    bad = []
    for module, path in _modules().items():
        if module in ENTRY_POINTS:
            continue
        mine = folder_of(module)
        allowed = LAYERS[mine] | {mine, "base"}
        for target in sorted(imports_of(path)):
            theirs = folder_of(target)
            if target != "topobind" and theirs not in allowed:
                bad.append(f"{module} ({mine}) imports {target} ({theirs})")
    return bad


def test_every_folder_has_a_rule() -> None:
    folders = {folder_of(m) for m in _modules()}
    assert folders <= LAYERS.keys(), (
        f"folders without a layering rule: {sorted(folders - LAYERS.keys())}; add them to "
        "LAYERS and to docs/architecture.md"
    )


@pytest.mark.slow
def test_every_import_follows_the_layers() -> None:
    assert violations() == []


def test_the_rules_have_no_cycle() -> None:
    """The rules themselves point one way: no folder may import a folder that may import it."""
    order: list[str] = []
    left = dict(LAYERS)
    while left:
        ready = [f for f, deps in left.items() if deps <= set(order) | {"base"}]
        assert ready, f"the layering rules have a cycle among {sorted(left)}"
        order.extend(sorted(ready))
        for f in ready:
            del left[f]


@pytest.mark.parametrize(
    ("module", "target", "allowed"),
    [("topobind.topo.topology", "topobind.plan.model", False),
     ("topobind.cli.main", "topobind.report.build", True),
     ("topobind.errors", "topobind.topo.topology", False),
     ("topobind.launch.build", "topobind.emit.srun", True)],
)  # fmt: skip
def test_the_rule_reads_folders_as_documented(module: str, target: str, allowed: bool) -> None:
    mine, theirs = folder_of(module), folder_of(target)
    assert (theirs in LAYERS[mine] | {mine, "base"}) is allowed


def import_cycles() -> list[list[str]]:
    """The import cycles among topobind's modules (every import counts, those under
    ``TYPE_CHECKING`` and inside functions included): strongly connected groups of two or
    more modules, each sorted."""
    modules = _modules()
    graph = {
        m: sorted(t for t in imports_of(p) if t in modules and t != m) for m, p in modules.items()
    }
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in graph:
        if v not in order:
            visit(v)
    return cycles


@pytest.mark.slow
def test_no_import_cycle() -> None:
    """Issue 28 item 1: build.py and the launchers imported each other (under TYPE_CHECKING)."""
    assert import_cycles() == []


@pytest.mark.slow
def test_no_launcher_imports_the_builder_or_the_runner() -> None:
    """A launcher module (launch/mpi_launchers/) reads the job's shape (launch/shape.py) and
    imports neither launch/build.py, which calls the launchers, nor launch/run.py."""
    above = {"topobind.launch.build", "topobind.launch.run"}
    bad = [
        f"{module} imports {target}"
        for module, path in _modules().items()
        if module.startswith("topobind.launch.mpi_launchers")
        for target in sorted(imports_of(path) & above)
    ]
    assert bad == []


def test_commands_hold_no_scratch_directory_handling() -> None:
    """Commands parse, call and print (docs/architecture.md): a scratch directory is made and
    removed below them (launch/run.py's scratch, run_job, dry_job), never in cli/commands/."""
    words = ("rmtree", "mkdtemp", "tempfile", "workdir()", "dry_run_dir(")
    bad = [
        f"{path.name}: {word}"
        for path in sorted((PACKAGE / "cli" / "commands").glob("*.py"))
        for word in words
        if word in path.read_text()
    ]
    assert bad == []


def _command_rule() -> tuple[list[str], int]:
    """The rule docs/architecture.md gives the command modules (section 4, "Commands only
    parse, call, print"): the modules they may not import, and their largest size."""
    text = (REPO / "docs" / "architecture.md").read_text()
    start = text.index("- **Commands only parse, call, print.**")
    rule = " ".join(text[start : text.index("\n- **", start + 1)].split())
    banned = rule[rule.index("imports none of") : rule.index("(processes")]
    size = re.search(r"at most (\d+) lines long", rule)
    assert size is not None, "docs/architecture.md no longer states the commands' size bound"
    return re.findall(r"`([\w.]+)`", banned), int(size.group(1))


def _all_imports(path: Path) -> set[str]:
    """Every module ``path`` imports (standard library and third party too), anywhere."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


#: what a loop over partitions in a command may call: printing and formatting only
PRINTING = frozenset({"print", "join", "len", "str", "sorted"})


def _partition_loops(path: Path) -> list[int]:
    """Lines of loops (statements and comprehensions) over partitions that call anything but
    printing and formatting: the engine's work, per partition."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.For):
            over, body = [(node.target, node.iter)], node.body
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            over = [(g.target, g.iter) for g in node.generators]
            body = [node.elt] if not isinstance(node, ast.DictComp) else [node.key, node.value]
        else:
            continue
        if not any("partition" in ast.unparse(t) + ast.unparse(i).lower() for t, i in over):
            continue
        calls = [c for part in body for c in ast.walk(part) if isinstance(c, ast.Call)]
        names = {getattr(c.func, "attr", getattr(c.func, "id", "")) for c in calls}
        if names - PRINTING:
            out.append(node.lineno)
    return out


COMMANDS = sorted((PACKAGE / "cli" / "commands").glob("*.py"))


def test_commands_keep_the_rule_of_the_architecture_doc() -> None:
    """Issue 28 item 4: each command module against docs/architecture.md's rule: no banned
    import (processes, scratch directories, formats), no loop over partitions, a size bound
    (validate.py was 630 lines holding calibrate's engine, run.py 535 holding verify's)."""
    banned, most = _command_rule()
    assert "subprocess" in banned and "topobind.runner" in banned and most >= 100
    bad = []
    for path in COMMANDS:
        found = _all_imports(path)
        bad += [f"{path.name} imports {b}" for b in banned
                if any(m == b or m.startswith(b + ".") for m in found)]  # fmt: skip
        bad += [f"{path.name}:{n} loops over partitions" for n in _partition_loops(path)]
        lines = len(path.read_text().splitlines())
        if lines > most:
            bad.append(f"{path.name} has {lines} lines (at most {most})")
    assert bad == []


def test_the_command_rule_catches_what_it_forbids(tmp_path: Path) -> None:
    """The checks above can fail: an import, a partition loop and a long module are found."""
    banned, most = _command_rule()
    bad = tmp_path / "bad.py"
    bad.write_text("import subprocess\nfrom topobind.runner import run_process\n"
                   "for p in validation.partitions_of(site, None):\n    run(site, p)\n"
                   "x = [judge(one) for one in out.partitions]\n"
                   "for p in site.partitions:\n    print(', '.join(p.access))\n"
                   + "\n" * most)  # fmt: skip
    assert {"subprocess", "topobind.runner"} <= _all_imports(bad) & set(banned)
    assert _partition_loops(bad) == [3, 5]  # the printing loop (line 6) is the command's
    assert len(bad.read_text().splitlines()) > most


def _private_plan_names(path: Path) -> list[str]:
    """The private names (a leading underscore: ``layouts._plan_layout``) ``path`` takes from a
    module of topobind.plan, by ``from ... import`` or as an attribute of an imported module."""
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()  # local names bound to a topobind.plan module
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("topobind.plan"):
            for a in node.names:
                if a.name.startswith("_"):
                    out.append(f"{node.module}.{a.name}")
                elif node.module == "topobind.plan":
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.asname and a.name.startswith(
                "topobind.plan."))  # fmt: skip
    for node in ast.walk(tree):
        private = isinstance(node, ast.Attribute) and node.attr[:1] == "_" != node.attr[1:2]
        if private and isinstance(node.value, ast.Name) and node.value.id in modules:
            out.append(f"{node.value.id}.{node.attr}")
    return out


def test_nothing_outside_plan_takes_a_private_planner() -> None:
    """Issue 28 item 5: ``request.plan`` is the one public planning entry; its stages
    (``layouts._plan_layout``, ``request._plan_in_job``) and any other private name of plan/
    are used inside plan/ only: not by the commands, launch, bench, scripts, ReFrame checks
    or tests."""
    files = [p for p in sorted(SRC.rglob("*.py")) if "plan" not in p.relative_to(PACKAGE).parts[:1]]
    for folder in ("scripts", "reframe_tests", "tests"):
        files += sorted(p for p in (REPO / folder).rglob("*.py") if "data" not in p.parts)
    bad = [f"{p.relative_to(REPO)}: {name}" for p in files for name in _private_plan_names(p)]
    assert len(files) > 100 and bad == []


def test_the_private_planner_check_catches_both_spellings(tmp_path: Path) -> None:
    """The check above can fail: an import of a private name and an attribute of a module."""
    bad = tmp_path / "bad.py"
    bad.write_text("from topobind.plan.layouts import _plan_layout\n"
                   "from topobind.plan import request\n"
                   "request._plan_in_job(topo, req)\nrequest.plan(topo, req)\n")  # fmt: skip
    assert _private_plan_names(bad) == ["topobind.plan.layouts._plan_layout",
                                        "request._plan_in_job"]  # fmt: skip


#: the modules that may read a resource manager's variables (issue 40 item 1): the allocation
#: adapters (topo/allocation.py's record is made there), and what is one manager's by nature
MANAGER_ADAPTERS = {
    "topobind.topo.slurm_allocation": "the Slurm adapter of the allocation",
    "topobind.topo.flux_allocation": "the Flux adapter of the allocation",
    "topobind.launch.mpi_launchers.slurm_mpi": "srun's --mpi (SLURM_MPI_TYPE): the srun launcher's",
    "topobind.validation.load": "the Slurm job's steps sampled during a check (SLURM_JOB_ID)",
}
MANAGER_VARIABLE = re.compile(r"^(SLURM|SLURMD|FLUX)_[A-Z0-9_]*$")


def manager_reads(path: Path) -> list[str]:
    """``SLURM_*``/``FLUX_*`` variables ``path`` reads: a name given to ``.get``/``getenv``/
    ``.pop``, used as a subscript, or tested with ``in``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[ast.expr] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            attr = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if attr in ("get", "getenv", "pop", "setdefault") and node.args:
                names.append(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            names.append(node.slice)
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
            names.append(node.left)
        for n in names:
            if isinstance(n, ast.Constant) and MANAGER_VARIABLE.match(str(n.value)):
                found.append(f"{n.value} (line {n.lineno})")
    return found


def test_only_the_adapters_read_a_resource_managers_variables() -> None:
    """Planning, launch and verification take the allocation record (topo/allocation.py);
    only its adapters read SLURM_* or FLUX_* (docs/architecture.md, section 1)."""
    bad = [
        f"{module}: {read}"
        for module, path in _modules().items()
        if module not in MANAGER_ADAPTERS
        for read in manager_reads(path)
    ]
    assert bad == []


def test_the_variable_scan_finds_reads(tmp_path: Path) -> None:
    probe = tmp_path / "m.py"
    probe.write_text(
        'import os\nos.environ.get("SLURM_JOB_ID")\nenv["FLUX_URI"]\n"SLURM_NNODES" in env\n'
        'x = {"SLURM_HOSTFILE": "f"}\n'  # a variable set for a launch: not a read
    )
    assert [r.split()[0] for r in manager_reads(probe)] == ["SLURM_JOB_ID", "FLUX_URI",
                                                            "SLURM_NNODES"]  # fmt: skip


#: who may import an allocation adapter: the manager picks one (topo/manager.py), the
#: adapters themselves, and `site check --live`'s node name (SLURMD_NODENAME, the Slurm
#: adapter's reader); everyone else takes the record
ADAPTER_IMPORTERS = {
    "topobind.topo.manager",
    "topobind.topo.slurm_allocation",
    "topobind.topo.flux_allocation",
    "topobind.cli.commands.site",
}
ADAPTERS = ("topobind.topo.slurm_allocation", "topobind.topo.flux_allocation")


def test_only_the_manager_imports_an_adapter() -> None:
    """A module that imported the Slurm adapter directly (topobind tune did, at its merge)
    would plan and launch as if Flux did not exist: everything else asks
    topo/manager.detect() for the record."""
    bad = sorted(
        f"{module}: {target}"
        for module, path in _modules().items()
        if module not in ADAPTER_IMPORTERS
        for target in imports_of(path)
        if target.startswith(ADAPTERS)
    )
    assert bad == []
