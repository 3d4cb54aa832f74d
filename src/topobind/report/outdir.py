"""The report directory (``topobind report -o DIR``): which DIR may be replaced, and the swap.

topobind replaces only a directory it wrote itself: every report directory holds a manifest,
``.topobind-report``, naming the files topobind wrote there, and an existing DIR is replaced
only while it holds exactly those files (plain files, nothing added, nothing renamed). Any
other existing DIR that is not empty, the current directory and every directory above it are
refused with one line naming DIR and the fix; nothing is deleted. The old report's files are
removed one by one by name (never a recursive delete), so a file that appears in it while
the new report is written survives.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from topobind.errors import TopobindError

MANIFEST = ".topobind-report"
_HEADER = "topobind-report 1"
_COMMENT = (
    "# written by 'topobind report'; it replaces this directory only while it holds "
    "exactly these files"
)


def manifest_text(names: list[str]) -> str:
    """The manifest of a report directory holding ``names`` (and the manifest itself)."""
    return "\n".join([_HEADER, _COMMENT, *sorted(names)]) + "\n"


_MAX_MANIFEST = 1 << 20  # a report's manifest names a few files


def _listed(outdir: Path) -> set[str] | None:
    """The file names the manifest of ``outdir`` lists; None without a readable manifest."""
    listed, _ = _manifest(outdir)
    return listed


def _manifest(outdir: Path) -> tuple[set[str] | None, str]:
    """(the names the manifest of ``outdir`` lists, "") or (None, what is wrong with it: ""
    when there is none). A name that cannot be a file of the directory (a NUL byte, ``.``,
    ``..``, a ``/``) makes the manifest not topobind's."""
    path = outdir / MANIFEST
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):
            return None, "is not a regular file"
        if st.st_size > _MAX_MANIFEST:
            return None, f"is {st.st_size:,} bytes, over the {_MAX_MANIFEST >> 20} MiB of one"
        with open(path, "rb") as fh:
            lines = fh.read(_MAX_MANIFEST + 1).decode("utf-8").splitlines()
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    except UnicodeDecodeError:
        return None, "is not UTF-8 text"
    if not lines or lines[0] != _HEADER:
        return None, f"does not start with '{_HEADER}'"
    names = {n for n in lines[1:] if n and not n.startswith("#")}
    bad = next((n for n in sorted(names) if "\0" in n or "/" in n or n in (".", "..")), None)
    if bad is not None:
        return None, f"lists {bad[:40]!r}, which no file of the directory can be named"
    return names, ""


def _unexpected(outdir: Path, listed: set[str]) -> list[str]:
    """Entries of ``outdir`` that are not plain files named by its manifest."""
    odd = []
    for entry in sorted(os.listdir(outdir)):
        if entry == MANIFEST:
            continue
        if entry not in listed or not stat.S_ISREG((outdir / entry).lstat().st_mode):
            odd.append(entry)
    return odd


def _holds_cwd(outdir: Path) -> bool:
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # the working directory was removed: nothing can hold it
        return False
    real = os.path.realpath(outdir)
    return here == real or here.startswith(real.rstrip(os.sep) + os.sep)


def check_replaceable(outdir: Path) -> None:
    """Raise :class:`TopobindError` unless ``outdir`` is missing, an empty directory, or a
    report directory topobind wrote that holds exactly the files of its manifest."""
    if not os.path.lexists(outdir):
        return
    if _holds_cwd(outdir):
        raise TopobindError(
            f"{outdir}: is the current directory or holds it; refusing to replace it: "
            "choose another -o (a new directory)"
        )
    if not outdir.is_dir():
        raise TopobindError(f"{outdir}: exists and is not a directory; choose another -o")
    try:
        entries = os.listdir(outdir)
    except OSError as exc:
        raise TopobindError(
            f"{outdir}: cannot be read ({exc.strerror}); refusing to replace it: choose another -o"
        ) from exc
    if not entries:
        return
    listed, wrong = _manifest(outdir)
    if listed is None and wrong:
        raise TopobindError(
            f"{outdir}: its {MANIFEST} manifest {wrong}, not one topobind wrote; refusing to "
            "replace it: choose another -o, or remove it"
        )
    if listed is None:
        if "report.json" in entries:
            raise TopobindError(
                f"{outdir}: holds a report.json but no {MANIFEST} manifest (not a report, or "
                "one of an older topobind); refusing to replace it: choose another -o, or if "
                f"it is an old report you no longer need, remove it yourself (rm -r {outdir})"
            )
        raise TopobindError(
            f"{outdir}: exists, is not empty and is not a topobind report (no {MANIFEST}); "
            "refusing to replace it: choose another -o, or remove it"
        )
    odd = _unexpected(outdir, listed)
    if odd:
        shown = ", ".join(odd[:3]) + (f" and {len(odd) - 3} more" if len(odd) > 3 else "")
        raise TopobindError(
            f"{outdir}: a topobind report that also holds files topobind did not write "
            f"({shown}); refusing to replace it: move them out, or choose another -o"
        )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove_old(holder: Path, old: Path, listed: set[str]) -> None:
    """Delete the old report's own files by name, then its (now empty) directories; anything
    else found there is left in place (a hidden ``.NAME.old-*`` directory beside DIR)."""
    for name in listed | {MANIFEST}:
        with contextlib.suppress(OSError, ValueError):  # the report's own file, or nothing
            (old / name).unlink()
    with contextlib.suppress(OSError):
        old.rmdir()
        holder.rmdir()


def write_directory(outdir: Path, files: dict[str, bytes]) -> None:
    """Create ``outdir`` holding exactly ``files`` and their manifest, replacing an old report
    as a whole (see :func:`check_replaceable`, checked again just before the swap)."""
    outdir = Path(os.path.realpath(outdir))
    outdir.parent.mkdir(parents=True, exist_ok=True)
    files = {**files, MANIFEST: manifest_text(list(files)).encode()}
    tmp = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.new-", dir=outdir.parent))
    try:
        for name, data in files.items():
            with open(tmp / name, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o777 & ~_umask())
        check_replaceable(outdir)
        if os.path.lexists(outdir):
            _swap(tmp, outdir)
        else:
            os.rename(tmp, outdir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap(tmp: Path, outdir: Path) -> None:
    """Move the old DIR away, check it still holds only its report, put the new one in."""
    holder = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.old-", dir=outdir.parent))
    old = holder / outdir.name
    os.rename(outdir, old)
    try:
        listed = _listed(old) or set()
        if os.listdir(old) and (not listed or _unexpected(old, listed)):
            raise TopobindError(f"{outdir}: changed while the report was written; try again")
        os.rename(tmp, outdir)
    except BaseException:
        os.rename(old, outdir)  # put the old report back
        holder.rmdir()
        raise
    _remove_old(holder, old, listed)
