"""Small wording helpers shared by the CLI's messages and the reports."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``plural(1, "group")`` -> "1 group"; ``plural(3, "group")`` -> "3 groups"."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"
