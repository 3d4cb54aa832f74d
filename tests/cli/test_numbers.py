"""One rule for every count and number a user gives (issue 37 item 22): ASCII digits, bounds,
one line naming the option; ``int()``/``float()`` alone took '١' (Arabic-Indic one) as 1,
'1_0' as 10, ' 1 ' and, for float, 'nan' and 'inf'. Property-based (Hypothesis, tests/
fuzzing.py) for the parsers: whole numbers, decimal numbers, sizes and counts with suffixes."""

from __future__ import annotations

import math

import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from topobind.cli.main import main
from topobind.errors import TopobindError
from topobind.inputs import MAX_DIGITS, real_number, suffixed, whole_number

HOSTILE = ["\u0661", "1_0", " 1", "1 ", "+1", "-1", "0x10", "1e3", "nan", "inf", "", "\u00b2",
           "1" * 40, "\uff11"]  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "stream", "--repeat", "1000000000"],
        *[["bench", "stream", f"--repeat={v}"] for v in HOSTILE],
        *[["bench", "stream", f"--ranks={v}"] for v in ("\u0661", "0", "1_0")],
        *[["bench", "stream", f"--threads={v}"] for v in ("\u0661", "-1")],
        *[["validate", "--site", "local", "--each-node", f"--repeat={v}"]
          for v in ("\u0661", "1001", "1_0")],
        *[["validate", "--site", "local", "--each-node", f"--threshold={v}"]
          for v in ("\u0661", "nan", "inf", "-0.1", "1_0", "11")],
        *[["calibrate", "--site", "local", f"--repeat={v}"] for v in ("\u0661", "0", "10000")],
        *[["calibrate", "--site", "local", f"--min-tolerance={v}"] for v in ("\u0661", "2")],
        *[["validate", "--site", "local", f"--retries={v}"] for v in ("\u0661", "-1")],
        *[["report", "r", "-o", "o", f"--warmup={v}"] for v in ("\u0661", "1_0")],
        *[["report", "r", "-o", "o", f"--slow-pct={v}"] for v in ("\u0661", "nan")],
    ],
)  # fmt: skip
def test_every_count_option_takes_ascii_digits_within_bounds(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    option = next(a for a in argv if a.startswith("--") and ("=" in a or a == "--repeat"))
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    if argv[0] != "bench":  # bench's kernel parser prints its usage first, as it always has
        assert len(err) == 1, err
    assert f"argument {option.split('=')[0]}" in err[-1] and "give a" in err[-1], err


@fuzz(300)
@given(st.text(max_size=2 * MAX_DIGITS))
def test_whole_number_is_ascii_digits_or_one_line(text: str) -> None:
    try:
        got = whole_number(text, "--n", 0, 10**9)
    except TopobindError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--n ")
        return
    assert text.isascii() and text.isdigit() and got == int(text)


@fuzz(300)
@given(st.one_of(st.text(max_size=40), st.floats(allow_nan=True).map(repr)))
def test_real_number_is_finite_ascii_within_bounds(text: str) -> None:
    try:
        got = real_number(text, "--f", 0, 10)
    except TopobindError as exc:
        assert "\n" not in str(exc) and "ASCII digits" in str(exc)
        return
    assert text.isascii() and math.isfinite(got) and 0 <= got <= 10
    assert text[:1] not in ("+", "-", " ") and "_" not in text


@fuzz(300)
@given(st.one_of(st.text(max_size=40),
                 st.tuples(st.floats(0, 1e6), st.sampled_from(["", "K", "M", "G", "T", "KiB"]))
                 .map(lambda t: f"{t[0]:g}{t[1]}")),  # fmt: skip
       st.booleans())  # fmt: skip
def test_a_size_is_a_whole_positive_number_or_one_line(text: str, binary: bool) -> None:
    """Issue 37 item 24: parse_size turned a tiny positive value ('0.0001K') into 0."""
    try:
        got = suffixed(text, "size", 1, 1 << 60, binary=binary)
    except TopobindError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("size ")
        return
    assert isinstance(got, int) and 1 <= got <= 1 << 60
    assert text.isascii()


@pytest.mark.parametrize(
    ("text", "binary", "want"),
    [("40G", True, 40 << 30), ("1.5M", True, 3 << 19), ("16GiB", True, 16 << 30),
     ("512", True, 512), ("20M", False, 20_000_000), ("1k", False, 1000), (".5K", True, 512)],
)  # fmt: skip
def test_sizes_and_counts_that_are_right(text: str, binary: bool, want: int) -> None:
    assert suffixed(text, "x", 1, 1 << 60, binary=binary) == want


@pytest.mark.parametrize("text", ["0.0001K", "0.4", "\u0664G", "1_0K", "-1K", "+1K", "nan",
                                  "inf", "", "G", "1e999G"])  # fmt: skip
def test_sizes_that_are_refused(text: str) -> None:
    with pytest.raises(TopobindError, match="give a size"):
        suffixed(text, "x", 1, 1 << 60)


def test_a_number_option_states_its_default_and_bounds_and_refuses_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from topobind.cli.arguments import add_number_arg

    p = argparse.ArgumentParser(prog="t")
    add_number_arg(p, "--slack", (0.0, 50.0), 2.5, "S", "how much slack")
    assert p.parse_args([]).slack == 2.5
    assert p.parse_args(["--slack", "50"]).slack == 50.0
    assert "how much slack (default 2.5; 0 to 50)" in " ".join(p.format_help().split())
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--slack", "51"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exc.value.code == 2 and err.startswith("t: error: argument --slack: '51':")
    assert "0 to 50" in err and "2.5, the default" in err
