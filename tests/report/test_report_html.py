"""The report's HTML page in real headless Chromium: it renders, every picture decodes,
tables are there, no script error, no network needed."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest
from fleetgen import FleetSpec, generate_fleet, parse_slow

from topobind.report.analysis import Options
from topobind.report.build import build_report

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Injected first in <head>: records script errors, and after 'load' writes into the DOM how
# many images there are, how many failed to decode (naturalWidth == 0) and how many tables.
PROBE = """<script>
window.__errors = [];
window.addEventListener('error', function (e) {
  window.__errors.push(String(e.message || e.type));
}, true);
window.onerror = function (m) { window.__errors.push(String(m)); };
window.addEventListener('load', function () {
  var imgs = document.images, broken = 0;
  for (var i = 0; i < imgs.length; i++) {
    if (!imgs[i].complete || imgs[i].naturalWidth === 0) broken++;
  }
  var pre = document.createElement('pre');
  pre.id = 'selfcheck';
  pre.textContent = JSON.stringify({images: imgs.length, broken: broken,
    tables: document.getElementsByTagName('table').length, errors: window.__errors});
  document.body.appendChild(pre);
});
</script>"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium not installed"),
]


def chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


def selfcheck(tmp: Path, html: str, name: str) -> dict[str, object]:
    page = tmp / name
    page.write_text(html.replace("<head>", "<head>" + PROBE, 1))
    proc = chromium(tmp, "--virtual-time-budget=10000", "--dump-dom", page.as_uri())
    m = re.search(r'<pre id="selfcheck">([^<]*)</pre>', proc.stdout)
    assert m, f"probe did not run: rc={proc.returncode} {proc.stderr[-500:]}"
    return json.loads(m.group(1).replace("&quot;", '"'))


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    spec = FleetSpec(
        hosts=12,
        runs=6,
        kernels=("stream", "latency", "c2c"),
        pages=("4k", "2M"),
        slow=parse_slow("gen-node0003:1.15"),
        layout="per-l3",  # the Layouts section draws it (stream 8x8, latency 1x1, c2c 1x2)
    )
    generate_fleet(root / "fleet", spec)
    build_report([str(root / "fleet")], root / "report", Options())
    return root / "report"


def test_page_renders_all_pictures_and_tables(report_dir: Path, tmp_path: Path) -> None:
    html = (report_dir / "index.html").read_text()
    pngs = sorted(report_dir.glob("*.png"))
    # hosts + ECDF per (kernel, pages), page-size comparisons, c2c and NUMA matrices, layouts
    assert len(pngs) >= 15
    assert len([p for p in pngs if p.name.startswith("layout-")]) == 3
    assert '<h2 id="layouts">Layouts</h2>' in html
    check = selfcheck(tmp_path, html, "check.html")
    assert check == {
        "images": len(pngs),
        "broken": 0,
        "tables": check["tables"],
        "errors": [],
    }
    assert int(check["tables"]) >= 3 + 6  # slow hosts, fleet, page sizes + one per group


def test_probe_catches_broken_images_and_errors(report_dir: Path, tmp_path: Path) -> None:
    """The check above can fail: a corrupted picture and a throwing script are detected."""
    html = (report_dir / "index.html").read_text()
    first = html.index("data:image/png;base64,") + len("data:image/png;base64,")
    broken = (
        html[:first]
        + base64.b64encode(b"not a png at all").decode()
        + html[html.index('"', first) :]
    )
    broken = broken.replace("</body>", "<script>undefinedFunction();</script></body>")
    check = selfcheck(tmp_path, broken, "broken.html")
    assert check["broken"] == 1
    assert check["errors"] and "undefinedFunction" in str(check["errors"])


def test_screenshot_is_not_blank(report_dir: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    proc = chromium(
        tmp_path,
        f"--screenshot={shot}",
        "--window-size=1400,3000",
        (report_dir / "index.html").as_uri(),
    )
    assert shot.exists(), proc.stderr[-500:]
    import matplotlib.image

    img = matplotlib.image.imread(shot)
    assert img.shape[0] == 3000 and img.shape[1] == 1400
    # a real page: many distinct colours (text, red slow rows, plots), not a white sheet
    assert img[..., :3].std() > 0.05
