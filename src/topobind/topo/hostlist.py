"""Slurm host lists without Slurm: compress ``node1,node2,node3,node7`` to ``node[1-3,7]``
and expand it back, the way ``scontrol show hostlist`` / ``hostnames`` write them
(zero-padded numbers keep their width: ``n[01-02]``). Every node list topobind prints goes
through :func:`shown` (natural order, hostlist notation, bounded length), and a table of many
ranks through :func:`grouped` (identical rows once, with their ranks and nodes)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from topobind.errors import TopobindError

_NAME = re.compile(r"^(.*?)(\d*)$")
MAX_EXPANDED = 1_000_000  # a bigger range is a typo, not a cluster


def _ranges(numbers: list[tuple[int, int]]) -> str:
    """Sorted (value, width) pairs -> '1-3,7' (a run continues only at the same width)."""
    parts: list[str] = []
    i = 0
    while i < len(numbers):
        j = i
        while (
            j + 1 < len(numbers)
            and numbers[j + 1][0] == numbers[j][0] + 1
            and numbers[j + 1][1] == numbers[i][1]
        ):
            j += 1
        lo, width = numbers[i]
        hi = numbers[j][0]
        text = f"{lo:0{width}d}" if i == j else f"{lo:0{width}d}-{hi:0{width}d}"
        parts.append(text)
        i = j + 1
    return ",".join(parts)


def compress(names: Iterable[str]) -> str:
    """``node1 node2 node3 node7`` -> ``node[1-3,7]``; ``''`` for no names."""
    groups: dict[str, set[tuple[int, int]]] = {}
    plain: set[str] = set()
    order: list[str] = []
    for name in names:
        prefix, digits = _NAME.match(name).groups()  # type: ignore[union-attr]
        if not digits:
            if name not in plain:
                plain.add(name)
                order.append(name)
            continue
        if prefix not in groups:
            groups[prefix] = set()
            order.append("\0" + prefix)
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        groups[prefix].add((int(digits), width))
    out: list[str] = []
    for key in order:
        if not key.startswith("\0"):
            out.append(key)
            continue
        prefix = key[1:]
        nums = sorted(groups[prefix])
        if len(nums) == 1:
            value, width = nums[0]
            out.append(f"{prefix}{value:0{width}d}")
        else:
            out.append(f"{prefix}[{_ranges(nums)}]")
    return ",".join(out)


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def expand(text: str) -> list[str]:
    """``node[1-3,7]`` -> ``['node1', 'node2', 'node3', 'node7']`` (one bracket per name)."""
    out: list[str] = []
    for part in _split_top(text):
        m = re.fullmatch(r"([^\[\]]*)\[([0-9,\-]+)\]([^\[\]]*)", part)
        if not m:
            if "[" in part or "]" in part or not re.fullmatch(r"[A-Za-z0-9._-]+", part):
                raise TopobindError(
                    f"host list {text!r}: cannot read {part!r}; write it as node[1-3,7] or "
                    "node1,node2"
                )
            out.append(part)
            continue
        prefix, body, suffix = m.groups()
        for rng in body.split(","):
            lo_s, _, hi_s = rng.partition("-")
            if not lo_s or (_ and not hi_s):
                raise TopobindError(f"host list {text!r}: empty range in [{body}]")
            lo, hi = int(lo_s), int(hi_s or lo_s)
            width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
            if hi < lo or hi - lo + len(out) > MAX_EXPANDED:
                raise TopobindError(
                    f"host list {text!r}: range {rng} is reversed or too large "
                    f"(at most {MAX_EXPANDED:,} names)"
                )
            out += [f"{prefix}{i:0{width}d}{suffix}" for i in range(lo, hi + 1)]
    return out


#: characters of a node list as topobind prints one (a line, whatever the node count)
MAX_SHOWN = 200
#: distinct rows a grouped table shows; the rest are counted in one line
MAX_GROUPS = 20


def natural_key(name: str) -> tuple[tuple[int, int | str, int], ...]:
    """Sort key: ``node2`` before ``node10`` (digit runs compare as numbers)."""
    return tuple(
        (0, int(p), len(p)) if p.isdigit() else (1, p, 0) for p in re.split(r"(\d+)", name)
    )


def shown(names: Iterable[str], limit: int = MAX_SHOWN) -> str:
    """The distinct ``names`` in natural order and hostlist notation (``node[1-64]``), at most
    about ``limit`` characters: a longer list is cut at a comma and ends ``,... (N nodes)``."""
    unique = sorted(set(names), key=natural_key)
    text = compress(unique)
    if len(text) <= limit:
        return text
    cut = text[: text.rfind(",", 0, limit)] or text[:limit]
    return f"{cut},...{']' if cut.count('[') > cut.count(']') else ''} ({len(unique):,} nodes)"


def grouped(items: Iterable[tuple[int, str, str]], max_groups: int = MAX_GROUPS) -> list[str]:
    """(rank, host, text) -> one line per distinct text, ``64 ranks, node[1-64]: text``
    (``rank 5, node2: text`` for one), in the order of their first rank, at most
    ``max_groups`` lines, then one line counting the rest: bounded whatever the rank count."""
    groups: dict[str, tuple[list[int], set[str]]] = {}
    for rank, host, text in items:
        ranks, hosts = groups.setdefault(text, ([], set()))
        ranks.append(rank)
        hosts.add(host)
    lines = []
    for text, (ranks, hosts) in list(groups.items())[:max_groups]:
        who = f"{len(ranks):,} ranks" if len(ranks) > 1 else f"rank {ranks[0]}"
        lines.append(f"{who}, {shown(hosts, MAX_SHOWN // 2) or '-'}: {text}")
    left = len(groups) - max_groups
    if left > 0:
        rest = sum(len(r) for r, _h in list(groups.values())[max_groups:])
        lines.append(f"... and {left:,} more kinds of rows ({rest:,} ranks)")
    return lines
