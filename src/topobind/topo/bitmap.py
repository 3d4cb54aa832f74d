"""hwloc's bitmap strings (cpusets, nodesets) -> sets of OS indexes, bounded.

One small module that the topology reader and the device reader both use (neither imports
the other for it)."""

from __future__ import annotations

from topobind.errors import TopologyError

#: Largest OS index of a PU or NUMA node (hwloc bitmaps longer than this are refused).
MAX_OS_INDEX = (1 << 20) - 1
_ZERO_WORDS = frozenset(("", "0x", "0x0", "0x00000000"))


def parse_hwloc_bitmap(text: str) -> frozenset[int]:
    """Parse hwloc's bitmap string (``0xffffffff,,0x00000003``: 32-bit words, most significant
    first, empty word = 0, ``0xf...f`` = infinitely set) into the set of OS indexes."""
    text = text.strip()
    if not text or text == "0x0":
        return frozenset()
    words = text.split(",")
    if len(words) * 32 > MAX_OS_INDEX + 1:
        raise TopologyError(
            f"hwloc cpuset {text[:40]!r}... has {len(words)} words: OS indexes beyond "
            f"{MAX_OS_INDEX}; not a node topology"
        )
    out: list[int] = []
    for pos, word in enumerate(reversed(words)):
        word = word.strip()
        if word in _ZERO_WORDS or "..." in word:  # "0xf...f": infinite, keep what is finite
            continue
        hexa = word[2:]
        if len(word) > 10 or word[:2] != "0x" or not (hexa.isascii() and hexa.isalnum()):
            raise TopologyError(f"bad hwloc cpuset word {word[:20]!r} in {text[:60]!r}")
        try:
            value = int(hexa, 16)
        except ValueError:
            raise TopologyError(f"bad hwloc cpuset word {word!r} in {text[:60]!r}") from None
        base = 32 * pos
        if value == 0xFFFFFFFF:  # a full word: the common case of big cpusets
            out.extend(range(base, base + 32))
            continue
        while value:
            low = value & -value
            out.append(base + low.bit_length() - 1)
            value ^= low
    return frozenset(out)
