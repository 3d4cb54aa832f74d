"""Verdicts as Prometheus metrics (issue 30 item 3): the text format, written atomically, and
served by the real node_exporter's textfile collector, started here on a loopback port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from topobind.errors import TopobindError
from topobind.validation import metrics

EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"

NODES = [
    metrics.NodeMetric("n1", "ok"),
    metrics.NodeMetric("n2", "slow", strong=False),
    metrics.NodeMetric("n3", "nonconforming"),
]
FIGURES = [
    metrics.FigureMetric("n1", "StreamCheck", "compact", "triad", "MB/s", 28000.0, 28000.0, 3,
                         True, 0.5),
    metrics.FigureMetric("n2", "StreamCheck", "compact", "triad", "MB/s", 7000.0, 28000.0, 3,
                         False, 0.875),
    metrics.FigureMetric("n2", "LatencyCheck", "local", "latency_ns", "ns", 140.0, 100.0, 3, True),
]  # fmt: skip


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the one sample of ``name`` whose labels include ``labels``."""
    found = []
    for line in text.splitlines():
        named = line.startswith((name + "{", name + " "))
        if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
            found.append(float(line.rsplit(" ", 1)[1]))
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_render_names_units_and_values() -> None:
    text = metrics.render(NODES, FIGURES, site="local", partition="slurm", when=1700000000.0)
    assert sample(text, "topobind_node_verdict", node="n2", verdict="slow") == 1.0
    assert sample(text, "topobind_node_verdict", node="n2", verdict="ok") == 0.0
    assert sample(text, "topobind_node_verdict", node="n3", verdict="nonconforming") == 1.0
    assert sample(text, "topobind_node_verdict_strong", node="n2") == 0.0
    bw = sample(text, "topobind_check_bandwidth_bytes_per_second", node="n2", metric="triad")
    assert bw == 7000.0 * 1e6
    assert sample(text, "topobind_check_ratio", node="n2", metric="triad") == 0.25
    assert sample(text, "topobind_check_latency_seconds", node="n2") == pytest.approx(140e-9)
    assert sample(text, "topobind_check_runs", node="n2", metric="triad") == 3.0
    assert sample(text, "topobind_check_verdict_strong", node="n2", metric="triad") == 0.0
    assert sample(text, "topobind_run_timestamp_seconds", site="local") == 1700000000.0
    assert "# TYPE topobind_node_verdict gauge" in text


def test_label_values_are_escaped() -> None:
    text = metrics.render([metrics.NodeMetric('n"1\\\n', "ok")], [], site="s", partition="p")
    assert 'node="n\\"1\\\\\\n"' in text


def test_write_is_atomic_and_refuses_what_the_collector_ignores(tmp_path: Path) -> None:
    dest = tmp_path / "topobind.prom"
    dest.write_text("old\n")
    metrics.write(dest, "new\n")
    assert dest.read_text() == "new\n" and oct(dest.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["topobind.prom"]  # no temporary left
    for bad, word in ((tmp_path / "x.txt", r"\*\.prom"), (tmp_path / "no" / "x.prom", "not exist"),
                      (tmp_path, "a directory")):  # fmt: skip
        with pytest.raises(TopobindError, match=word):
            metrics.write(bad, "x\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The real prometheus-node-exporter on a loopback port, textfile collector only."""
    if not os.access(EXPORTER, os.X_OK):
        pytest.fail("prometheus-node-exporter is not installed (scripts/apt-packages.txt)")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    port = free_port()
    proc = subprocess.Popen(
        [EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
         "--collector.textfile", f"--collector.textfile.directory={textdir}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"node_exporter exited: {proc.stderr.read().decode()[-500:]}")
                time.sleep(0.1)
        yield url, textdir
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_node_exporter_serves_the_verdicts(exporter: tuple[str, Path]) -> None:
    url, textdir = exporter
    text = metrics.render(NODES, FIGURES, site="local", partition="slurm")
    metrics.write(textdir / "topobind.prom", text)
    served = urllib.request.urlopen(url, timeout=5).read().decode()
    assert sample(served, "topobind_node_verdict", node="n2", verdict="slow") == 1.0
    assert sample(served, "topobind_check_ratio", node="n2", metric="triad") == 0.25
    assert sample(served, "topobind_check_verdict_strong", node="n2", metric="triad") == 0.0
    # the collector parsed the file without error
    assert sample(served, "node_textfile_scrape_error") == 0.0
