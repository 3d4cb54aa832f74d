"""Files: atomic output (a reader never sees a half-written file) and the package's own JSON
schemas (``schemas/*.json``, package data)."""

from __future__ import annotations

import contextlib
import os
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> str:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename;
    the path written."""
    target = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    name = os.path.basename(target)
    import tempfile  # only when a file is written (a plan printed to stdout writes none)

    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual file mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
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
