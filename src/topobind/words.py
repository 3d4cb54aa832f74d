"""Small wording helpers shared by the CLI's messages and the reports."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``plural(1, "group")`` -> "1 group"; ``plural(3, "group")`` -> "3 groups"."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def did_you_mean(given: str, choices: list[str] | tuple[str, ...]) -> str:
    """`` (did you mean 'srun'?)`` for a close choice, else ``""``."""
    import difflib  # lazily: only a wrong name pays for it

    close = difflib.get_close_matches(given, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
