"""Files: atomic output (a reader never sees a half-written file), the one rule every option
that writes a file follows (:func:`output_file`, :func:`output_dir`: checked before any work)
and the package's own JSON schemas (``schemas/*.json``, package data).

The rule: a path that is empty or ``-`` is refused (a file named ``-`` is ``./-``); a path
that exists and is not a regular file (or a symlink to one) is refused, never replaced (a
FIFO, ``/dev/null``, a directory); the directory must exist and take a new file (a
temporary file is created and removed there: a read-only or pseudo file system such as
``/proc`` is refused up front, not after a long run).
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Any

from topobind.errors import TopobindError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def output_file(
    path: str | os.PathLike[str], option: str, fix: str = "", *, made: bool = False
) -> str:
    """``path`` if a file can be written there under the rule of this module; else a
    :class:`TopobindError` of one line naming ``option`` (``--metrics``) and ``fix`` (default:
    give another OPTION FILE). ``made``: the writer creates the file's folder (the user's
    folder of calibrated references), so a folder that does not exist yet is checked as
    :func:`output_dir` checks one."""
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target)) if target not in ("", "-") else ""
    if made and folder and not os.path.isdir(folder):
        output_dir(folder, f"{option} {target}", fix)  # the writer makes it
        return target
    fix = fix or f"give another {option} FILE"
    if target in ("", "-"):
        shown = "an empty path" if not target else "'-' is not standard output here"
        raise TopobindError(f"{option}: {shown}; {fix} (a file named '-' is ./-)")
    kind = _not_regular(target) if os.path.lexists(target) else ""
    if kind:
        raise TopobindError(
            f"cannot write {option} {target}: it exists and is {kind}, not a regular file "
            f"(never replaced); {fix}"
        )
    writable_dir(os.path.dirname(os.path.abspath(target)), f"{option} {target}", fix)
    return target


def output_dir(path: str | os.PathLike[str], option: str, fix: str = "") -> str:
    """``path`` if it is a directory that takes new files, or does not exist and its nearest
    existing parent does (it is created when written); else a one-line :class:`TopobindError`."""
    target = os.fspath(path)
    fix = fix or f"give another {option} DIR"
    if target in ("", "-"):
        shown = "an empty path" if not target else "'-' is not standard output here"
        raise TopobindError(f"{option}: {shown}; {fix} (a directory named '-' is ./-)")
    where = os.path.abspath(target)
    while not os.path.lexists(where):
        where = os.path.dirname(where)
    if not os.path.isdir(where):
        kind = _not_regular(where) or "a regular file"
        raise TopobindError(
            f"cannot write {option} {target}: {where} is {kind}, not a directory; {fix}"
        )
    writable_dir(where, f"{option} {target}", fix)
    return target


def writable_dir(parent: str, what: str, fix: str) -> None:
    """Refuse (one line: ``cannot write WHAT: ...; FIX``) a directory that does not exist or
    where a new file cannot be made: a temporary file is created there and removed."""
    if not os.path.isdir(parent):
        raise TopobindError(
            f"cannot write {what}: directory {parent} does not exist; create it or {fix}"
        )
    import tempfile  # only when an output is checked

    try:
        fd, tmp = tempfile.mkstemp(prefix=".topobind-probe.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise TopobindError(
            f"cannot write {what}: directory {parent} takes no new file "
            f"(creating one there failed: {exc.strerror or exc}); {fix}"
        ) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _not_regular(path: str) -> str:
    """'' for a regular file or a symlink to one; else what it is (a FIFO, a directory...)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "a dangling symbolic link" if os.path.islink(path) else "unreadable"
    if stat.S_ISREG(mode):
        return ""
    from topobind.inputs import file_kind  # the one wording of file kinds

    return file_kind(mode)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> str:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename;
    the path written. A path that exists and is not a regular file (or a symlink to one) is
    refused (:class:`TopobindError`), never replaced; a write that fails (a full disk) is a
    :class:`TopobindError` of one line, the old file kept."""
    target = os.fspath(path)
    if os.path.lexists(target) and _not_regular(target):
        raise TopobindError(
            f"cannot write {target}: it exists and is {_not_regular(target)}, not a regular "
            "file (never replaced); give another path"
        )
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    name = os.path.basename(target)
    import tempfile  # only when a file is written (a plan printed to stdout writes none)

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise TopobindError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):  # a full disk, a quota: one line, nothing half-written
            raise TopobindError(
                f"cannot write {target}: {exc.strerror or exc}; nothing was written"
            ) from None
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> str:
    """Text twin of :func:`atomic_write_bytes` (UTF-8)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


#: the package's JSON schemas (pyproject's package data), beside this module
SCHEMAS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")


def package_schema(name: str) -> Any:
    """The JSON schema ``schemas/NAME`` of the package (``plan.schema.json``...)."""
    import json  # only where a schema is read: a plan printed as JSON needs no json module

    with open(os.path.join(SCHEMAS_DIR, name), encoding="utf-8") as f:
        return json.load(f)
