"""Checks of what users hand to topobind, before any work depends on it: whole numbers,
host names and input files. Each check is bounded (a huge number, a FIFO or /dev/zero costs
no more than a small valid input) and raises :class:`TopobindError` with one line that names
the input and says what to give instead. The command line's argparse ``type=`` helpers built
on them live in the command layer (:mod:`topobind.cli.arguments`).
"""

import math
import os
import stat
from typing import NamedTuple

from topobind.errors import TopobindError

#: Most digits a count may have before it is even converted (``int`` of a 5000-digit string
#: raises; of a 4000-digit one costs time): 9 digits hold every count topobind accepts.
MAX_DIGITS = 9

# RFC 1123 host names (letters, digits, '-', dots between labels) and '_', which some
# clusters use; what goes unquoted into a rankfile line.
_HOST_ENDS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_HOST_CHARS = _HOST_ENDS | {".", "-"}


def _is_host(text: str) -> bool:
    """1 to 254 of [A-Za-z0-9_.-], starting and ending with none of '.-'."""
    return (
        0 < len(text) <= 254
        and text[0] in _HOST_ENDS
        and text[-1] in _HOST_ENDS
        and _HOST_CHARS.issuperset(text)
    )


def whole_number(text: str, what: str, lo: int = 1, hi: int = 1 << 20, hint: str = "") -> int:
    """``text`` as an integer in ``lo..hi``: ASCII digits only (no sign, no '1_000', no
    non-ASCII digits that ``int()`` would take), at most :data:`MAX_DIGITS` of them;
    ``hint`` ends the refusal (e.g. the default)."""
    digits = 0 < len(text) <= MAX_DIGITS and text.isdigit() and text.isascii()
    if not digits or not lo <= int(text) <= hi:
        raise TopobindError(f"{what} {_shown(text, 40)!r}: give a whole number from {lo} to {hi}"
                            + (f" ({hint})" if hint else ""))  # fmt: skip
    return int(text)


#: a decimal number as topobind reads one: ASCII digits, one optional point and exponent
#: ('0.05', '.5', '5e-2'); no sign, no '_', no non-ASCII digits, no 'nan'/'inf'
_DECIMAL_CHARS = frozenset("0123456789.eE+-")
MAX_DECIMAL_CHARS = 32


def _decimal(text: str) -> float:
    """``text`` as a float when it is ASCII digits with an optional point and exponent, else
    NaN (the one rule of :func:`real_number` and :func:`suffixed`)."""
    import re

    ok = (0 < len(text) <= MAX_DECIMAL_CHARS and _DECIMAL_CHARS.issuperset(text)
          and re.fullmatch(r"(\d+\.?\d*|\.\d+)([eE][+-]?\d{1,3})?", text) is not None)  # fmt: skip
    return float(text) if ok else math.nan


def real_number(text: str, what: str, lo: float, hi: float, *, example: str = "") -> float:
    """``text`` as a finite number with ``lo <= value <= hi``, written in ASCII digits (with
    a point and an exponent: ``0.05``, ``5e-2``): ``float()`` alone takes ``'١'``, ``'1_0'``,
    ``' 1 '``, ``'nan'`` and ``'inf'``, none of which a user means as a number here."""
    value = _decimal(text)
    if not (math.isfinite(value) and lo <= value <= hi):
        eg = f", e.g. {example}" if example else ""
        raise TopobindError(f"{what} {_shown(text, 40)!r}: give a number from {lo:g} to {hi:g} "
                            f"in ASCII digits{eg}")  # fmt: skip
    return value


#: binary (byte sizes) and decimal (counts of elements) suffixes
BINARY_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
DECIMAL_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def suffixed(text: str, what: str, lo: int, hi: int, *, binary: bool = True) -> int:
    """A size in bytes (``binary``: ``40G`` = 40 x 2^30, ``1.5M``; an ``iB``/``B`` ending is
    taken) or a count (``20M`` = 2 x 10^7): ASCII digits, a whole result in ``lo..hi`` (a
    tiny value is refused, never rounded to 0: ``0.0001K`` is no size)."""
    t = text.strip().upper()
    if binary:
        t = t.removesuffix("B").removesuffix("I")
    units = BINARY_UNITS if binary else DECIMAL_UNITS
    unit = t[-1:] if t[-1:] in units and t[-1:] else ""
    number = t[: len(t) - len(unit)]
    got = _decimal(number) * units[unit]
    value = int(got) if math.isfinite(got) else -1
    if not lo <= value <= hi:
        eg = "e.g. 40G, 512M (K, M, G, T: powers of 1024)" if binary else "e.g. 20M (k, M, G)"
        raise TopobindError(f"{what} {_shown(text, 40)!r}: give a {'size' if binary else 'count'} "
                            f"from {_human(lo, binary)} to {_human(hi, binary)}, {eg}")  # fmt: skip
    return value


def duration(value: object, where: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h`` -> seconds; TopobindError naming ``where`` otherwise
    (site settings such as node_budget: read where the site is checked and where it is used)."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(value), re.ASCII)  # no '١m'
    if not m or float(m.group(1)) <= 0:
        raise TopobindError(f"{where}: {value!r} is not a duration (e.g. 90s, 10m, 1h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _human(n: int, binary: bool) -> str:
    if not binary:
        return f"{n:,}"
    for name, size in sorted(BINARY_UNITS.items(), key=lambda kv: -kv[1]):
        if size > 1 and n >= size and n % size == 0:
            return f"{n // size}{name}"
    return str(n)


def host_name(text: str, what: str = "--host") -> str:
    """A host name that can stand in a rankfile line (``rank 0=NAME slot=...``)."""
    if not _is_host(text):
        raise TopobindError(
            f"{what} {_shown(text, 40)!r} is not a host name (letters, digits, '.', '-', "
            "'_'); give the node's name as 'hostname' or Slurm prints it"
        )
    return text


class InputFile(NamedTuple):
    """A kind of input file: ``what`` it is (named in every refusal), its size limit, the
    ``fix`` each refusal ends with (what to give instead) and the error type raised."""

    what: str
    max_bytes: int
    fix: str
    error: type[TopobindError] = TopobindError

    def read_bytes(self, path: str | os.PathLike[str]) -> bytes:
        """The bytes of a regular file of at most ``max_bytes``; never blocks on a FIFO,
        never reads a device or a directory."""
        what, fix, error = self.what, self.fix, self.error
        shown = repr(_shown(os.fspath(path), 200))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise error(f"{what} {shown} does not exist; {fix}") from None
        except IsADirectoryError:
            raise error(f"{what} {shown} is a directory, not a file; {fix}") from None
        except OSError as exc:
            raise error(f"cannot read {what} {shown}: {exc.strerror or exc}; {fix}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise error(f"{what} {shown} is {file_kind(st.st_mode)}, not a regular file; {fix}")
            if st.st_size > self.max_bytes:
                raise error(
                    f"{what} {shown} is {st.st_size} bytes, more than the limit of "
                    f"{self.max_bytes}; {fix}"
                )
            data = _read_at_most(fd, self.max_bytes + 1)
        except OSError as exc:
            raise error(f"cannot read {what} {shown}: {exc.strerror or exc}; {fix}") from None
        finally:
            os.close(fd)
        if len(data) > self.max_bytes:  # grew while read (or a /proc-like size of 0)
            raise error(f"{what} {shown} is more than the limit of {self.max_bytes} bytes; {fix}")
        if not data:
            raise error(f"{what} {shown} is empty; {fix}")
        return data

    def read_text(self, path: str | os.PathLike[str]) -> str:
        """:meth:`read_bytes` decoded as UTF-8 (a binary file is refused, not decoded)."""
        data = self.read_bytes(path)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            shown = repr(_shown(os.fspath(path), 200))
            raise self.error(
                f"{self.what} {shown} is not UTF-8 text (binary?); {self.fix}"
            ) from None


def _shown(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters for an error line."""
    return text if len(text) <= limit else text[:limit] + "..."


def read_head(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most the first ``limit`` bytes of a regular file, opened without blocking: a FIFO,
    a device or a directory is an OSError, never a hang (for files read whole or not at all,
    :meth:`InputFile.read_bytes` says why in one line)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"{os.fspath(path)} is {file_kind(mode)}, not a regular file")
        return _read_at_most(fd, limit)
    finally:
        os.close(fd)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < limit:
        chunk = os.read(fd, min(1 << 20, limit - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, for an error line ("a FIFO (named pipe)", ...)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
