"""HPL driver: input generation, output parser, a real 2-rank HPL run (Debian hpcc)."""

from __future__ import annotations

import json
import math
import shutil
from typing import Any

import pytest
from plans import plan_of

from topobind.bench import hpl
from topobind.errors import TopobindError
from topobind.measure import programs as kernels
from topobind.measure import results
from topobind.measure.results import load_result
from topobind.topo.topology import load

needs_hpl = pytest.mark.skipif(
    not (shutil.which("hpcc") or shutil.which("xhpl")), reason="no hpcc/xhpl installed"
)


@pytest.mark.parametrize("ranks", range(1, 65))
def test_grid_is_most_square_with_p_le_q(ranks: int) -> None:
    p, q = hpl.grid(ranks)
    assert p * q == ranks and p <= q
    # no divisor of ranks lies strictly between p and sqrt(ranks)
    assert not any(ranks % d == 0 for d in range(p + 1, math.isqrt(ranks) + 1))


@pytest.mark.parametrize("nb", [64, 192, 256])
@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.8])
def test_problem_size_fits_and_is_multiple_of_nb(nb: int, fraction: float) -> None:
    mem = hpl.total_memory_bytes()
    n = hpl.problem_size(mem, fraction, nb)
    assert n % nb == 0
    assert 8 * n * n <= fraction * mem
    assert 8 * (n + nb) ** 2 > fraction * mem  # largest such multiple


def test_config_rounds_n_down_and_rejects_bad_input() -> None:
    cfg = hpl.make_config(6, n=2000, nb=192)
    assert (cfg.n, cfg.nb, cfg.p, cfg.q) == (1920, 192, 2, 3)
    with pytest.raises(TopobindError):
        hpl.make_config(2, n=100, nb=192)
    with pytest.raises(TopobindError):
        hpl.make_config(0)
    with pytest.raises(TopobindError):
        hpl.make_config(2, mem_fraction=1.5)


def test_hpccinf_has_hpl_lines_then_ptrans_lines() -> None:
    cfg = hpl.make_config(8, n=4000, nb=192)
    lines = hpl.hpccinf_txt(cfg).splitlines()
    assert len(lines) == 36  # HPL.dat (31 lines), separator line 32, PTRANS lines 33-36
    assert lines[5].split()[0] == str(cfg.n) and cfg.n % 192 == 0
    assert lines[7].split()[0] == "192"
    assert (lines[10].split()[0], lines[11].split()[0]) == ("2", "4")
    assert lines[31].startswith("#####")
    assert hpl.hpl_dat(cfg).splitlines() == lines[:31]


TRUNCATED = """\
Begin of HPL section.
================================================================================
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR11C2R4        2000   192     1     2               0.29              1.865e+01
"""


def test_truncated_outputs_raise_one_line_errors() -> None:
    for text in (TRUNCATED, TRUNCATED + "End of HPL section.\n", "", "garbage\n"):
        with pytest.raises(TopobindError) as exc:
            hpl.parse_output(text, "fixture")
        assert "\n" not in str(exc.value) and str(exc.value).startswith("fixture: ")


PROGRESS: list[str] = []


@pytest.fixture(scope="module")
def real_run() -> hpl.HplRun:
    plan = plan_of(load("live"), "compact", ranks=2, threads=1)
    return hpl.run_hpl(plan, n=2000, nb=192, progress=PROGRESS.append, heartbeat=0.2)


@pytest.mark.slow
@needs_hpl
def test_long_runs_report_progress(real_run: hpl.HplRun) -> None:
    # A start line, then a heartbeat with the elapsed time and hpcc's current test.
    assert PROGRESS[0] == (
        "hpl: hpcc N=1920 NB=192 P=1 Q=2, 2 rank(s) (hpcc runs every HPC Challenge test, HPL last)"
    )
    beats = PROGRESS[1:]
    assert beats and all(b.startswith("hpl: ") and " s" in b for b in beats)
    assert any(", hpcc in its " in b and b.endswith(" test") for b in beats)


@pytest.mark.slow
@needs_hpl
def test_real_two_rank_hpl_passes_residual(real_run: hpl.HplRun) -> None:
    out = real_run.output
    assert (out.n, out.nb, out.p, out.q) == (1920, 192, 1, 2)
    assert out.passed and 0 <= out.residual < 16.0
    assert out.gflops > 0.1 and out.time > 0
    res = load_result(__import__("json").dumps(real_run.doc))
    assert res.kernel == "hpl" and res.valid and res.ranks == 2
    assert res.headline is not None and res.headline.value == pytest.approx(out.gflops)
    assert res.params["N"] == 1920 and res.params["P"] * res.params["Q"] == 2


@pytest.mark.slow
@needs_hpl
def test_parser_on_real_output_and_its_truncations(real_run: hpl.HplRun) -> None:
    text = real_run.text
    again = hpl.parse_output(text)
    assert again == real_run.output
    # the table's rounded Gflops agrees with the summary's HPL_Tflops
    row = next(ln for ln in text.splitlines() if ln.startswith("WR"))
    assert float(row.split()[-1]) == pytest.approx(again.gflops, rel=1e-3)
    # cut the real output right after the result line, and before the end of the section
    cut = text.index(row) + len(row)
    for bad in (text[:cut], text[: text.index("End of HPL section.")]):
        with pytest.raises(TopobindError) as exc:
            hpl.parse_output(bad, "hpccoutf.txt")
        assert "\n" not in str(exc.value)


def _envelope(doc: dict[str, Any]) -> dict[str, object]:
    """The shape of a result document: its keys, and the keys of each section's entries."""
    metric = next(iter(doc["metrics"].values()))
    return {
        # evidence: written by libtb around a C kernel's run; HPL's document is written in
        # Python around hpcc, which carries none yet (docs/results-format.md says so)
        "top": [k for k in doc if k not in ("rank", "matrices", "evidence")],
        "metric": sorted(metric),
        "headline": sorted(doc["headline"]),
        "placement": sorted(doc["placement"][0]),
    }


@pytest.mark.slow
@pytest.mark.usefixtures("built_kernels")
def test_hpl_result_is_written_through_the_result_model() -> None:
    """An HPL document passes the schema, reads back to the same record, and has the
    envelope a C kernel writes (dgemm: the same keys, in the same order)."""
    plan = plan_of(load("synthetic:core:2 pu:1"), "compact", ranks=2, threads=1)
    out = hpl.HplOutput("WR11C2R4", 2000, 192, 1, 2, 1.5, 3.2, 0.002, True)
    pages = results.Pages("2M", 2048, False, "LD_PRELOAD shim", "hugetlb-2M")
    res = hpl.hpl_result(plan, out, started="2026-11-25T12:00:00Z", pages=pages, params={})
    doc = results.result_document(res)
    back = results.parse_result(json.loads(json.dumps(doc)))
    assert back.headline == res.headline and back.metrics == res.metrics
    assert back.placement == res.placement and back.pages == res.pages
    assert back.metrics["gflops"].best == 3.2 and back.params["N"] == 2000
    assert [p.affinity for p in back.placement] == [(0,), (1,)]

    c_doc = json.loads(
        kernels.run_kernel_raw(
            "dgemm", ["--n", "64", "--reps", "2", "--pages", "4k", "--json", "-"]
        ).stdout
    )
    assert _envelope(doc) == _envelope(c_doc)
    assert set(doc["pages"]) <= set(c_doc["pages"])  # the kernels add their own details


def test_an_hpl_result_carries_the_checks_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47 item 6: as the C kernels do, from TOPOBIND_TIER; a bad one is one line."""
    plan = plan_of(load("synthetic:core:2 pu:1"), "compact", ranks=2, threads=1)
    out = hpl.HplOutput("WR11C2R4", 2000, 192, 1, 2, 1.5, 3.2, 0.002, True)

    def tier() -> object:
        res = hpl.hpl_result(plan, out, started="2026-11-25T12:00:00Z", pages=None, params={})
        return results.parse_result(json.loads(json.dumps(results.result_document(res)))).tier

    monkeypatch.delenv("TOPOBIND_TIER", raising=False)
    assert tier() is None
    monkeypatch.setenv("TOPOBIND_TIER", "smoke")
    assert tier() == "smoke"
    monkeypatch.setenv("TOPOBIND_TIER", "quick tier")
    with pytest.raises(TopobindError, match=r'^TOPOBIND_TIER: "tier" must be a tier name'):
        tier()


def test_hpl_runs_in_the_launch_scratch_directory_and_leaves_nothing(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28 item 4: HPL's directory comes from launch/run.py's one scratch context (on
    this node, under ``workdir``), and is gone after a failed run too."""
    import subprocess

    from topobind.launch import run as jobrun

    used: list[tuple[Any, ...]] = []
    real = jobrun.scratch

    def spy(*args: Any) -> Any:
        used.append(args)
        return real(*args)

    ran: list[str] = []

    def fake_run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        ran.append(str(kw["cwd"]))
        assert (kw["cwd"] / "HPL.dat").is_file()
        return subprocess.CompletedProcess(argv, 1, "", "no MPI here")

    monkeypatch.setattr(jobrun, "scratch", spy)
    monkeypatch.setattr(hpl, "find_hpl", lambda: ("xhpl", "/bin/false"))
    monkeypatch.setattr(hpl, "hpl_launcher", lambda exe: "none")
    monkeypatch.setattr(hpl, "run_process", fake_run)
    plan = plan_of(load("synthetic:core:2 pu:1"), "compact", ranks=1, threads=1)
    with pytest.raises(TopobindError, match="exited with status 1"):
        hpl.run_hpl(plan, n=100, nb=32, workdir=tmp_path)
    assert used == [("topobind-hpl-", str(tmp_path))]
    assert len(ran) == 1 and ran[0].startswith(str(tmp_path / "topobind-hpl-"))
    assert list(tmp_path.iterdir()) == []
