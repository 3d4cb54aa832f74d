"""One finding of the Spack checks, printed as one line.

``spack.yaml:18: specs[3] 'openmpi +slurrm': column 10: package 'openmpi' has no variant ...``

Errors make ``topobind spack check`` exit 1. Notes are what the reference data cannot
decide (a version older than the newest ones it lists); they are printed, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    file: str
    message: str
    line: int = 0  # 1-based line in the file; 0 when not known
    where: str = ""  # e.g. "specs[3]", "packages.slurm.externals[0]"
    spec: str = ""  # the spec string concerned, if any
    column: int = 0  # 1-based column in the spec string; 0 when not about one spot
    note: bool = False

    def __str__(self) -> str:
        head = f"{self.file}:{self.line}" if self.line else self.file
        parts = [head]
        if self.where or self.spec:
            parts.append(
                " ".join(p for p in (self.where, repr(self.spec) if self.spec else "") if p)
            )
        if self.column:
            parts.append(f"column {self.column}")
        text = ": ".join(parts) + ": " + self.message
        return ("note: " + text) if self.note else text


@dataclass(frozen=True)
class Finding:
    """A problem inside one spec string, before the caller knows the file and place."""

    message: str
    column: int = 0
    note: bool = False

    def place(self, file: str, line: int, where: str, spec: str) -> Problem:
        return Problem(file, self.message, line, where, spec, self.column, self.note)
