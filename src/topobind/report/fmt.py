"""Number formatting shared by the text, markdown, HTML and pictures."""

from __future__ import annotations

import math

from topobind.errors import plural  # noqa: F401 (re-exported: report modules import it from here)

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(32), 127, 0x85)} | {
    10: "\\n",
    13: "\\r",
    9: "\\t",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def one_line(text: str) -> str:
    """``text`` with its control characters escaped (a newline as ``\\n``): a host name
    holding one cannot split a line of the text summary (the HTML escapes it too)."""
    return text.translate(_CONTROL) if not text.isprintable() else text


def value(v: float | None) -> str:
    """A measured value with sensible precision: 239,633 / 2,192 / 105.4 / 28.44 / 1.2."""
    if v is None or not math.isfinite(v):
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    return f"{v:.3g}"


def pct(v: float | None, signed: bool = False) -> str:
    """A percentage given in percent (12.345 -> '12.3%')."""
    if v is None or not math.isfinite(v):
        return "-"
    v = round(v, 1) + 0.0  # no "-0.0%"
    return f"{v:+.1f}%" if signed else f"{v:.1f}%"


def frac_pct(v: float | None, signed: bool = False) -> str:
    """A fraction shown as a percentage (0.12345 -> '12.3%')."""
    return pct(None if v is None else v * 100.0, signed)


def mads(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{round(v, 1) + 0.0:.1f}"


def count(n: int) -> str:
    return f"{n:,}"


def tick(v: float) -> str:
    """An axis tick: 240,000 / 105 / 2.5 (no needless decimals)."""
    if not math.isfinite(v):
        return ""
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.4g}"
