"""The exception types the CLI turns into a one-line error and an exit status (2 unless
the error says otherwise), and :func:`plural`, the wording of counts in messages."""

from __future__ import annotations


class TopobindError(Exception):
    """A user-facing error: bad input, an impossible request, a missing tool.

    The message is one line that says what is wrong and what to change.
    """

    exit_status = 2

    def error_lines(self) -> list[str]:
        """What the CLI prints, each line after ``topobind: error: ``."""
        return [str(self)]

    summary: str | None = None  # a last line the CLI prints after ``topobind: ``


class Problems(TopobindError):
    """Several problems found at once (a site file, a node against its description): one
    ``topobind: error:`` line each, then an optional summary line."""

    def __init__(self, problems: list[str], summary: str | None = None, exit_status: int = 2):
        super().__init__(problems[0] if problems else summary or "problems found")
        self.problems = problems
        self.summary = summary
        self.exit_status = exit_status

    def error_lines(self) -> list[str]:
        return list(self.problems)


class TopologyError(TopobindError):
    """The topology source is missing, malformed or unusable."""


class PlanError(TopobindError):
    """The requested layout cannot be planned on this topology."""


class CannotRun(TopobindError):
    """A program could not be started; exit status as shells give it: 127 when it does not
    exist, 126 when it exists but cannot be executed (permission denied, a directory...)."""

    def __init__(self, program: str, exc: OSError) -> None:
        super().__init__(f"cannot run {program}: {exc.strerror or exc}")
        self.exit_status = 127 if isinstance(exc, FileNotFoundError) else 126


class ProbeFailed(TopobindError):
    """The placement probe (kernels/bin/whereami) under the launch exited non-zero: the exit
    status is the probe's (1 when it died of a signal mapped to 0)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"the placement probe failed (exit {status})")
        self.exit_status = (128 - status if status < 0 else status) or 1


class VerifyFailed(TopobindError):
    """Placement (or device variables) differ from the plan; the program is not launched."""

    exit_status = 1


class Interrupted(TopobindError):
    """SIGINT or SIGTERM while topobind itself waits (not while a launch runs: the runner
    passes those to the launch): exit status 128 + the signal, as a shell gives it."""

    def __init__(self, signum: int, name: str, during: str) -> None:
        super().__init__(f"interrupted ({name}) {during}")
        self.exit_status = 128 + signum


def plural(n: int, word: str, many: str | None = None) -> str:
    """``plural(1, "group")`` -> "1 group"; ``plural(3, "group")`` -> "3 groups"."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def did_you_mean(given: str, choices: list[str] | tuple[str, ...]) -> str:
    """`` (did you mean 'srun'?)`` for a close choice, else ``""``."""
    import difflib  # only for a misspelled name

    close = difflib.get_close_matches(given, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
