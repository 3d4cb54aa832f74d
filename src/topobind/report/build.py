"""Build a report directory: read, analyse, draw, render, and swap the directory in whole.

Nothing is written until every input has been read and checked. The report is built in a
hidden temporary directory beside the target, then renamed into place; an existing report
directory is renamed away first and deleted last, so a reader sees the old report or the
new one, never a mix or a half-written file.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from topobind.errors import TopobindError
from topobind.report.analysis import Options, Report, analyse
from topobind.report.document import json_bytes, report_json
from topobind.report.gallery import all_pictures
from topobind.report.html import html_page
from topobind.report.layouts import collect_layouts
from topobind.report.picture import Picture, PictureHook
from topobind.report.reader import read_results
from topobind.report.text import markdown_summary, text_summary
from topobind.topology import load as load_topology


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
    if outdir.exists():
        if not outdir.is_dir():
            raise TopobindError(f"{outdir}: exists and is not a directory; choose another -o")
        if any(outdir.iterdir()) and not (outdir / "report.json").is_file():
            raise TopobindError(
                f"{outdir}: exists, is not empty and holds no report.json (not a topobind report); "
                "refusing to replace it: choose another -o"
            )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_directory(outdir: Path, files: dict[str, bytes]) -> None:
    """Create ``outdir`` holding exactly ``files``, replacing an old one as a whole."""
    outdir = Path(os.path.abspath(outdir))
    outdir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.new-", dir=outdir.parent))
    old_holder: Path | None = None
    try:
        for name, data in files.items():
            with open(tmp / name, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o777 & ~_umask())
        if outdir.exists():
            old_holder = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.old-", dir=outdir.parent))
            os.rename(outdir, old_holder / outdir.name)
            try:
                os.rename(tmp, outdir)
            except BaseException:
                os.rename(old_holder / outdir.name, outdir)  # put the old report back
                raise
        else:
            os.rename(tmp, outdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old_holder is not None:
            shutil.rmtree(old_holder, ignore_errors=True)


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
    :mod:`topobind.report.layouts`).
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
    report = dataclasses.replace(report, layouts=collect_layouts(read.runs, given))
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
