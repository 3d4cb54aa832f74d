"""Spack's version matching, far enough to ask: does any known version satisfy ``@...``?

Spack's rules (``spack/version``): components split at ``.``, ``-`` and ``_`` compare as
numbers when numeric; ``develop``, ``main``, ``master``, ``head``, ``trunk``, ``stable``
are newer than every numbered version. ``@1.2`` is a range: it matches 1.2 and every
1.2.x; ``@=1.2`` matches 1.2 only; ``@1.2:1.4`` includes 1.4.x; ``@:3`` and ``@2.9:`` are
open; ``@1.2,1.4`` is a list (any item may match). ``@git.ref=1.2`` is checked as 1.2.
"""

from __future__ import annotations

import re

INFINITY_NAMES = ("develop", "main", "master", "head", "trunk", "stable")
Key = tuple[tuple[int, int, str], ...]


def version_key(version: str) -> Key:
    """Sort key: (rank, number, text) per component; infinity names rank highest."""
    if version in INFINITY_NAMES:
        return ((3, len(INFINITY_NAMES) - INFINITY_NAMES.index(version), ""),)
    out = []
    for part in re.findall(r"[0-9]+|[A-Za-z]+", version):
        out.append((1, int(part), "") if part.isdigit() else (0, 0, part))
    return tuple(out)


def _is_prefix(short: Key, long: Key) -> bool:
    return long[: len(short)] == short


def satisfies(known: str, item: str) -> bool:
    """Does version ``known`` satisfy one item of a version list (``1.2``, ``=1.2``, ``a:b``)?"""
    if item.startswith("git.") or re.fullmatch(r"[0-9a-fA-F]{40}(=.*)?", item):
        item = item.split("=", 1)[1] if "=" in item else ""
        if not item:
            return True  # a bare git ref: any version of the package
    k = version_key(known)
    if item.startswith("="):
        return k == version_key(item[1:])
    if ":" not in item:
        return _is_prefix(version_key(item), k)
    lo, hi = item.split(":", 1)
    if lo and k < version_key(lo):
        return False
    if hi:
        hk = version_key(hi)
        return k <= hk or _is_prefix(hk, k)
    return True


def items(version_list: str) -> list[str]:
    return [part for part in version_list.split(",") if part]


def newest(versions: list[str] | tuple[str, ...]) -> str | None:
    numbered = [v for v in versions if v not in INFINITY_NAMES]
    return max(numbered, key=version_key) if numbered else None
