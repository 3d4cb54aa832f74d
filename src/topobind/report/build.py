"""Build a report directory: read, analyse, draw, render, and swap the directory in whole.

Nothing is written until every input has been read and checked. The report is built in a
hidden temporary directory beside the target, then renamed into place; an existing report
directory is renamed away first and its files deleted last, so a reader sees the old report
or the new one, never a mix or a half-written file. Only a directory topobind wrote (its
manifest, nothing else in it) is ever replaced: see :mod:`topobind.report.outdir`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from topobind.errors import TopobindError
from topobind.report.analysis import Options, Report, analyse
from topobind.report.document import json_bytes, report_json
from topobind.report.gallery import all_pictures
from topobind.report.html import html_page
from topobind.report.layouts_seen import collect_layouts
from topobind.report.outdir import check_replaceable, write_directory
from topobind.report.picture import Picture, PictureHook
from topobind.report.reader import read_results
from topobind.report.text import markdown_summary, text_summary
from topobind.topo.topology import load as load_topology


@dataclass(frozen=True)
class Built:
    report: Report
    directory: Path
    text: str
    markdown: str
    pictures: tuple[Picture, ...]
    seconds: dict[str, float]  # wall time of each phase: read, analyse, pictures, render, write


def _check_outdir(outdir: Path, inputs: Sequence[str]) -> None:
    out_real = os.path.realpath(outdir)
    for name in inputs:
        real = os.path.realpath(name)
        if real == out_real or real.startswith(out_real + os.sep):
            raise TopobindError(
                f"{name}: input lies inside the output directory {outdir}; choose another -o"
            )
    check_replaceable(outdir)


def build_report(
    inputs: Sequence[str],
    outdir: str | os.PathLike[str],
    options: Options | None = None,
    hooks: list[PictureHook] | None = None,
    title: str = "topobind fleet report",
    topology: str | None = None,
) -> Built:
    """Read ``inputs``, write the report into ``outdir``; raises TopobindError for bad input.

    ``topology`` (``--topology``: ``live``, an hwloc XML file or ``synthetic:...``) is the
    node the layouts in the results are drawn on; without it each result's
    ``params.topology``, or this machine's topology for results made here (see
    :mod:`topobind.report.layouts_seen`).
    """
    opts = options or Options()
    out = Path(outdir)
    seconds: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        seconds[name] = now - clock
        clock = now

    _check_outdir(out, inputs)
    given = load_topology(topology) if topology is not None else None
    read = read_results(inputs, exclude=[out])
    lap("read")
    report = analyse(read.runs, opts, read.inputs, read.files)
    report = dataclasses.replace(
        report, layouts=collect_layouts(read.runs, given), skipped=read.skipped
    )
    lap("analyse")
    pictures = tuple(all_pictures(report, hooks))
    lap("pictures")
    text = text_summary(report, pictures)
    markdown = markdown_summary(report)
    files: dict[str, bytes] = {
        "report.json": json_bytes(report_json(report, pictures)),
        "summary.txt": text.encode(),
        "summary.md": markdown.encode(),
        "index.html": html_page(report, pictures, title).encode(),
    }
    names = set(files)
    for p in pictures:
        if p.filename in names:
            raise TopobindError(f"two pictures would share the file name {p.filename}")
        names.add(p.filename)
        files[p.filename] = p.png
    lap("render")
    write_directory(out, files)
    lap("write")
    return Built(report, out, text, markdown, pictures, seconds)
