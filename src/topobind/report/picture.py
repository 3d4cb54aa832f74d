"""One picture of a report (PNG bytes and the words around it), and the hook type that adds
pictures to a report. A leaf module: every picture maker imports it, it imports none."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from topobind.report.analysis import Report


@dataclass(frozen=True)
class Picture:
    filename: str  # e.g. "hosts-stream-nolayout-2MiB.png"
    title: str  # shown above the picture in HTML
    caption: str  # one or two sentences: how to read it
    kind: str  # ecdf | hosts | matrix | pages | layout (recorded) | plan (planned) | ...
    png: bytes
    #: what was drawn, for tests and report.json (the cause pictures: their points)
    data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


PictureHook = Callable[["Report"], list[Picture]]
