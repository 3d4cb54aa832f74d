"""The documentation site (mkdocs.yml, 'make docs'): every page in the navigation and in the
index, the strict build refuses a broken link, a missing anchor and a page left out, the
built pages load nothing from outside, and (slow) a real headless Chromium opens the index,
a tutorial and the command reference and finds the layouts page with the search box."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cdp import CHROMIUM, Browser
from paths import REPO

DOCS = REPO / "docs"
SITE = REPO / "build" / "docs"
SHOTS = REPO / "build" / "docs-check"
MKDOCS = Path(sys.executable).with_name("mkdocs")
GROUPS = ["Home", "Tutorials", "How-to guides", "Reference", "Explanation", "Contributing"]

needs_mkdocs = pytest.mark.skipif(not MKDOCS.exists(), reason="the docs extra is not installed")


def config() -> dict:
    # mkdocs.yml holds one !!python tag (the toc's slugify); the nav is plain YAML
    text = (REPO / "mkdocs.yml").read_text()
    return yaml.safe_load(re.sub(r"!!python/\S+ \{.*\}", "null", text))


def nav_pages(nav: list) -> list[str]:
    out: list[str] = []
    for item in nav:
        for value in item.values() if isinstance(item, dict) else [item]:
            out += nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_every_page_is_in_one_group_of_the_nav_and_in_the_index() -> None:
    nav = config()["nav"]
    assert [next(iter(item)) for item in nav] == GROUPS
    pages = nav_pages(nav)
    assert len(pages) == len(set(pages)), "a page is in the nav twice"
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(pages) == on_disk
    index = (DOCS / "index.md").read_text()
    headings = re.findall(r"^## (.+)$", index, re.M)
    assert headings == GROUPS[1:]
    linked = set(re.findall(r"\]\(([^)#]+\.md)", index))
    assert linked == set(pages) - {"index.md"}


def test_readme_keeps_the_two_commands_and_points_to_the_index() -> None:
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "docs/index.md" in readme and "make docs" in readme


def test_readme_is_one_screen_with_the_commands_first() -> None:
    """Issue 48 item 4: at most 100 lines; the two commands in its first block; the line
    for users without root puts the venv outside the clone, whatever the clone is called."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 100, len(readme.splitlines())
    first_block = readme.split("```")[1]
    assert "make demo" in first_block and "make test" in first_block
    (pip_line,) = [ln for ln in readme.splitlines() if "-m venv" in ln]
    assert "~/topobind " not in pip_line and "./topobind" not in pip_line, pip_line
    assert '"$PWD[' in pip_line, pip_line
    assert "docs/explanation/performance.md" in readme


def build(docs_dir: Path, site: Path, cfg: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(cfg), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
    )


@needs_mkdocs
@pytest.mark.slow
@pytest.mark.parametrize(
    "broken, message",
    [
        ("[a](missing.md)", "missing.md"),
        ("[a](b.md#nowhere)", "nowhere"),
        (None, "c.md"),  # a page on disk, not in the nav
    ],
)
def test_the_strict_build_refuses(tmp_path: Path, broken: str | None, message: str) -> None:
    """The site's own validation settings, on a two-page site with one defect."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# A\n\n{broken or '[b](b.md#here)'}\n")
    (docs / "b.md").write_text("# B\n\n## Here\n")
    if broken is None:
        (docs / "c.md").write_text("# C\n")
    cfg = (REPO / "mkdocs.yml").read_text()
    cfg = re.sub(r"^(docs_dir|site_dir):.*$", "", cfg, flags=re.M)
    cfg = cfg[: cfg.index("\nnav:")] + "\nnav:\n  - index.md\n  - b.md\n"
    (tmp_path / "mkdocs.yml").write_text(cfg)
    ok = build(docs, tmp_path / "site", tmp_path / "mkdocs.yml")
    assert ok.returncode != 0, ok.stderr
    assert message in ok.stderr and "strict" in ok.stderr


@pytest.fixture(scope="module")
def site() -> Path:
    """build/docs, rebuilt (strict) unless 'make docs' built it after the last change."""
    if not MKDOCS.exists():
        pytest.skip("the docs extra is not installed")
    index = SITE / "index.html"
    sources = [REPO / "mkdocs.yml", *DOCS.rglob("*")]
    if not index.exists() or max(p.stat().st_mtime for p in sources) > index.stat().st_mtime:
        done = build(DOCS, SITE, REPO / "mkdocs.yml")
        assert done.returncode == 0, done.stderr
    return SITE


REMOTE = re.compile(r"""(?:src|href|srcset|action)\s*=\s*["']?(?:https?:)?//""", re.I)
CSS_REMOTE = re.compile(r"""(?:url\(|@import)\s*["']?(?:https?:)?//""", re.I)


@pytest.mark.slow
def test_the_built_pages_load_nothing_from_outside(site: Path) -> None:
    """No script, style, font, image or link points off the site: it works offline."""
    bad = []
    for page in site.rglob("*.html"):
        html = page.read_text()
        bad += [f"{page.relative_to(site)}: {m[0]}" for m in REMOTE.finditer(html)]
    for css in site.rglob("*.css"):
        bad += [f"{css.relative_to(site)}: {m[0]}" for m in CSS_REMOTE.finditer(css.read_text())]
    assert not bad, bad[:10]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "-d", str(site)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


H1 = "document.querySelector('h1').firstChild.textContent.trim()"
HREFS = "Array.from(document.querySelectorAll('{}')).map(a => a.getAttribute('href'))"


@pytest.mark.slow
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium not installed")
def test_a_browser_reads_the_site_and_its_search_finds_the_layouts_page(
    served: str, tmp_path: Path
) -> None:
    shutil.rmtree(SHOTS, ignore_errors=True)
    with Browser(tmp_path) as b:
        b.open(served)
        assert b.eval(H1) == "topobind documentation"
        sections = b.eval(
            "Array.from(document.querySelectorAll('.md-nav--primary > .md-nav__list > li'))"
            ".map(li => li.querySelector(':scope > a, :scope > label').textContent.trim())"
        )
        assert sections == GROUPS, sections
        b.screenshot(SHOTS / "index.png")

        b.open(served + "tutorials/first-bound-job/")
        assert b.eval(H1).startswith("Your first bound job")
        script = b.eval("document.querySelector('article pre code').textContent")
        assert script.startswith("#!/bin/bash") and "topobind-run" in script
        b.screenshot(SHOTS / "tutorial.png")

        b.open(served + "reference/commands/")
        ids = b.eval("Array.from(document.querySelectorAll('h3[id]')).map(h => h.id)")
        assert {"topobind-plan", "topobind-run", "topobind-validate"} <= set(ids)

        b.open(served)
        b.wait_for(
            "!document.querySelector('.md-search-result__meta').textContent"
            ".includes('Initializing')",
            "the search index",
        )
        b.eval("document.querySelector('.md-search__input').focus()")
        b.type("every-other-core")
        found = b.wait_for(
            f"{HREFS.format('.md-search-result__item > a')}"
            ".filter(h => new URL(h, location.href).pathname === '/layouts/').length",
            "the layouts page in the search results",
        )
        assert found
        b.screenshot(SHOTS / "search.png")
        assert all(u.startswith((served, "data:", "blob:")) for u in b.requested), b.requested
        assert not b.errors, b.errors
