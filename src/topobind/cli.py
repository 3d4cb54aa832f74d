"""The ``topobind`` command: thin front end over the engine modules.

Each subcommand lives in the module that owns its concept and exposes
``add_subparser(subparsers)``; that function registers the parser and sets
``func`` (a callable taking the parsed namespace and returning an exit status).
"""

from __future__ import annotations

import gc
import os
import sys

from topobind.errors import TopobindError

TYPE_CHECKING = False  # typing costs a few ms at start-up: annotations only
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

# Modules that provide subcommands, in the order --help lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "topobind.commands.topo",  # show, plan
    "topobind.commands.run",  # run, env, verify
    "topobind.commands.spack",  # spack check, spack externals
    "topobind.commands.report",  # report
    "topobind.commands.draw",  # draw
    "topobind.commands.bench",  # bench
    "topobind.commands.site",  # site list, site check
    "topobind.commands.validate",  # validate, calibrate
)


# Commands that job scripts call on every launch: their parser is built alone, so a plan
# does not pay for importing the report/ReFrame modules (see `make bench-plan`).
FAST_COMMANDS: dict[str, str] = {
    "show": "topobind.commands.topo",
    "plan": "topobind.commands.topo",
    "env": "topobind.commands.run",
}


# Fast commands whose usual command lines are parsed without argparse (topobind.quickargs).
QUICK_COMMANDS: tuple[str, ...] = ("show", "plan")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argparse parser of every command, or of the commands of module ``only``."""
    from topobind.cliparse import build_parser as build

    return build((only,) if only else SUBCOMMAND_MODULES)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    fast = bool(argv) and argv[0] in FAST_COMMANDS
    if fast:  # a plan makes ~10^4 objects and no garbage cycles: no collector passes
        gc.disable()
    try:
        return _dispatch(argv)
    finally:
        if fast:
            gc.enable()


def _parse(argv: list[str]) -> argparse.Namespace | None:
    """The parsed command line (None: print the help). show and plan try the argparse-free
    parser first (:mod:`topobind.quickargs`); argparse takes whatever it does not."""
    if argv and argv[0] in QUICK_COMMANDS:
        from topobind.quickargs import parse

        quick = parse(argv, FAST_COMMANDS[argv[0]])
        if quick is not None:
            return quick  # type: ignore[return-value]
    parser = build_parser(FAST_COMMANDS.get(argv[0]) if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return None
    return args


def _dispatch(argv: list[str]) -> int:
    args = _parse(argv)
    if args is None:
        return 2
    try:
        return int(args.func(args))
    except TopobindError as exc:  # the one place errors are printed
        for line in exc.error_lines():
            print(f"topobind: error: {line}", file=sys.stderr)
        if exc.summary:
            print(f"topobind: {exc.summary}", file=sys.stderr)
        return exc.exit_status
    except BrokenPipeError:
        return 0


def entry() -> None:
    """The ``topobind`` command (pyproject's console script): :func:`main`, then exit.

    After the commands job scripts call on every launch (show, plan, env), it flushes the
    output and leaves with ``os._exit``: Python's teardown of every module and object would
    add about 6 % to a plan (``make bench-plan``), and these commands leave no temporary
    file, thread or exit handler behind."""
    status = main()
    if len(sys.argv) > 1 and sys.argv[1] in FAST_COMMANDS:
        for stream in (sys.stdout, sys.stderr):
            try:  # (not contextlib.suppress: importing contextlib costs start-up time)  # noqa: SIM105
                stream.flush()
            except (BrokenPipeError, ValueError):  # the reader is gone (| head), or closed
                pass
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":
    entry()
