"""The rule by which ``topobind calibrate`` turns sessions into references
(topobind.validation.calibration): every reference it writes is a limit a bad node can cross,
quiet or busy. Synthetic values: no machine performance is compared here."""

from __future__ import annotations

import pytest

from topobind.bench.hpl import mpirun_error
from topobind.validation import calibration, sites
from topobind.validation.calibration import crossable, derive_target

# sessions as calibrate sees them: steady, noisy, and wild (a neighbour halved a session)
SESSIONS = {
    "steady": [100.0, 101.0, 99.5],
    "noisy": [80.0, 100.0, 120.0],
    "wild": [40.0, 100.0, 260.0],
}
VARIABILITY = {  # % figures, including the worst a busy 2-core node gave (frac 50, cv 100)
    "max_slowdown": [[1.2, 3.0, 2.5], [103.8, 90.0, 60.0], [255.6, 165.3, 200.0]],
    "cv": [[0.5, 1.0, 0.8], [55.2, 100.7, 80.0]],
    "frac_slower_5pct": [[0.0, 10.0, 5.0], [40.0, 50.0, 45.0], [50.0, 50.0, 50.0]],
}


def every_figure() -> list[tuple[str, str, sites.MetricSpec]]:
    return [(c, m, spec) for c, chk in sites.CHECKS.items() for m, spec in chk.metrics.items()]


@pytest.mark.parametrize("busy", [False, True])
@pytest.mark.parametrize("floor", [0.0, 0.1, 1.0])
def test_every_reference_calibrate_can_write_is_crossable(busy: bool, floor: float) -> None:
    written = 0
    for check, metric, spec in every_figure():
        cases = VARIABILITY[metric] if calibration.is_variability(spec) else SESSIONS.values()
        for values in cases:
            d = derive_target(check, metric, list(values), floor, busy)
            if d is None:
                assert busy and calibration.is_variability(spec)
                continue
            written += 1
            assert crossable(spec, d.reference, d.lower, d.upper), (check, metric, values, d)
    assert written > 0


def test_variability_limits_stay_below_what_the_metric_can_reach() -> None:
    # the example: 2 x the worst session gave frac_slower_5pct 100 % (it can only reach
    # 50 %) and max_slowdown 103.8 %
    frac = derive_target("dgemm", "frac_slower_5pct", [40.0, 50.0], 0.1)
    assert frac is not None and frac.reference == 40.0 and (frac.lower, frac.upper) == (-1.0, 0.0)
    slow = derive_target("dgemm", "max_slowdown", [51.9, 20.0], 0.1)
    assert slow is not None and slow.reference == 50.0
    cv = derive_target("dgemm", "cv", [1.0, 2.0], 0.1)  # quiet: the floor
    assert cv is not None and cv.reference == 5.0
    hpl = derive_target("hpl", "max_slowdown", [3.0, 7.0], 0.1)  # 2 x worst, under the cap
    assert hpl is not None and hpl.reference == 14.0
    frac_spec = sites.CHECKS["dgemm"].metrics["frac_slower_5pct"]
    assert not crossable(frac_spec, 100.0, -1.0, 0.0)  # what calibrate used to write
    assert not crossable(frac_spec, 50.0, -1.0, 0.0)


def test_busy_node_leaves_the_good_side_open_and_writes_no_variability() -> None:
    rate = derive_target("stream", "triad", [10_000.0, 12_000.0, 11_000.0], 0.1, busy=True)
    assert rate is not None and rate.upper is None and rate.lower is not None
    assert rate.lower == pytest.approx(-min(0.9, 3 * 1000 / 11_000), abs=1e-3)
    quiet = derive_target("stream", "triad", [10_000.0, 12_000.0, 11_000.0], 0.1)
    assert quiet is not None and quiet.upper == pytest.approx(0.273, abs=1e-3)
    lat = derive_target("latency", "latency_ns", [90.0, 100.0, 130.0], 0.1, busy=True)
    assert lat is not None and lat.lower is None and lat.upper == 0.5  # 3 x 30 % capped at 50 %
    assert derive_target("dgemm", "cv", [10.0, 20.0], 0.1, busy=True) is None
    # a rate can fall to 0: -100 % would accept anything, so the lower bound stops at -90 %
    wild = derive_target("hpl", "gflops", [1.0, 10.0, 11.0], 1.0)
    assert wild is not None and wild.lower == -0.9


BANNER = "-" * 74


def test_mpirun_error_is_the_real_message() -> None:
    slots = (
        f"{BANNER}\nThere are not enough slots available in the system to satisfy the 2\n"
        "slots that were requested by the application:\n\n  hpcc\n\nEither request fewer "
        f"slots for your application, or make more slots\navailable for use.\n{BANNER}\n"
    )
    assert mpirun_error(slots) == (
        "There are not enough slots available in the system to satisfy the 2 slots that were "
        "requested by the application:"
    )
    crash = (
        f"HPL ERROR: out of memory\n{BANNER}\nPrimary job  terminated normally, but 1 process "
        f"returned\na non-zero exit code.\n{BANNER}\n{BANNER}\nmpirun detected that one or more"
        f"\n{BANNER}\n"
    )
    assert mpirun_error(crash).startswith("HPL ERROR: out of memory; mpirun: Primary job")
    assert mpirun_error("") == "(no message)"


@pytest.mark.slow
def test_mpirun_error_of_a_real_mpirun() -> None:
    import os
    import subprocess

    too_many = 4 * len(os.sched_getaffinity(0))  # more ranks than the machine has slots
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run(
        ["/usr/bin/mpirun", "-np", str(too_many), "true"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    message = mpirun_error(done.stderr or done.stdout)
    assert message.startswith("There are not enough slots available in the system"), message
    assert f"satisfy the {too_many} slots" in message and "---" not in message
