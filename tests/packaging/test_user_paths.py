"""User and site data outside the package (issue 38 item 3): the user's sites in
``$XDG_CONFIG_HOME/topobind/sites`` beside the shipped ones (a name of the user's wins),
``$TOPOBIND_SITES_DIR`` in place of the shipped ones, state in ``$TOPOBIND_STATE_DIR`` or
``$XDG_STATE_HOME/topobind``, and ``topobind --version`` saying where each lives. (Calibrating a
site shipped inside an installed package is in test_wheel_install.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from paths import REPO

from topobind import paths
from topobind.cli.main import main
from topobind.errors import TopobindError
from topobind.validation import sites


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "TOPOBIND_STATE_DIR", "TOPOBIND_SITES_DIR",
                "TOPOBIND_REFRAME_RESULTS"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_state_dir_honours_topobind_then_xdg_then_home(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert paths.state_dir() == home / ".local" / "state" / "topobind"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")  # XDG: a relative value is ignored
    assert paths.state_dir() == home / ".local" / "state" / "topobind"
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "st"))
    assert paths.state_dir() == home / "st" / "topobind"
    monkeypatch.setenv("TOPOBIND_STATE_DIR", str(home / "mine"))
    assert paths.state_dir() == home / "mine"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "cfg"))
    assert paths.user_sites_dir() == home / "cfg" / "topobind" / "sites"


def test_a_relative_topobind_state_dir_is_ignored_as_xdg_ignores_one(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """TOPOBIND_STATE_DIR=state named a folder in whatever directory a command started in:
    tune records written from one folder were not found from another."""
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "st"))
    monkeypatch.setenv("TOPOBIND_STATE_DIR", "state")
    for cwd in (home, home / "st"):
        cwd.mkdir(exist_ok=True)
        monkeypatch.chdir(cwd)
        assert paths.state_dir() == home / "st" / "topobind"
    monkeypatch.setenv("TOPOBIND_STATE_DIR", "")  # empty: unset
    assert paths.state_dir() == home / "st" / "topobind"
    assert paths.ignored_settings() == []
    monkeypatch.setenv("TOPOBIND_STATE_DIR", "./state")
    monkeypatch.setenv("XDG_CONFIG_HOME", "cfg")
    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    assert "TOPOBIND_STATE_DIR='./state' ignored: not an absolute path" in out
    assert "XDG_CONFIG_HOME='cfg' ignored: not an absolute path" in out
    assert f"state: {home / 'st' / 'topobind'} (tuning records)" in out


def _user_site(home: Path, name: str, title: str) -> Path:
    folder = home / ".config" / "topobind" / "sites" / name
    folder.mkdir(parents=True)
    text = (REPO / "site_configs" / "local" / "site.yaml").read_text()
    text = text.replace("name: local", f"name: {name}", 1)
    text = text.replace("description:", f"description: {title!r} #", 1)
    (folder / "site.yaml").write_text(text)
    return folder


def test_a_users_site_is_read_beside_the_shipped_ones_and_wins_by_name(home: Path) -> None:
    shipped = sites.site_names()
    assert "betzy" in shipped and "local" in shipped
    _user_site(home, "mine", "my cluster")
    assert sites.site_names() == sorted([*shipped, "mine"])
    assert sites.load_site("mine").description == "my cluster"
    assert sites.load_site("betzy").path == REPO / "site_configs" / "betzy" / "site.yaml"
    user_local = _user_site(home, "local", "my own local")
    assert sites.load_site("local").path == user_local / "site.yaml"
    assert sites.load_site("local").description == "my own local"


def test_topobind_sites_dir_replaces_the_shipped_sites(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = home / "admin-sites"
    shutil.copytree(REPO / "site_configs" / "betzy", admin / "betzy")
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(admin))
    assert sites.site_names() == ["betzy"]
    _user_site(home, "mine", "my cluster")
    assert sites.site_names() == ["betzy", "mine"]
    with pytest.raises(TopobindError, match="no site 'local' in "):
        sites.load_site("local")


def test_version_says_where_each_kind_of_file_lives(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "st"))
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith("topobind ")
    user_sites = home / ".config" / "topobind" / "sites"
    assert second.startswith(f"sites: {user_sites}, {REPO / 'site_configs'}; ")
    assert f"references of shipped sites: {user_sites}; " in second
    assert (
        f"state: {home / 'st' / 'topobind'} (tuning records); bench results: ./results; " in second
    )
    assert second.endswith(f"ReFrame results and history: {REPO / 'results' / 'reframe'}")


def test_in_package_of_a_symlink_loop_is_false(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed package asks whether a site file is shipped: a user's path that loops
    is not (Path.resolve raised RuntimeError on it)."""
    monkeypatch.setattr(paths, "in_checkout", lambda: False)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert not paths.in_package(tmp_path / "a")
    assert paths.in_package(paths.PACKAGE / "site_configs" / "x.yaml")


def test_an_empty_xdg_state_home_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOPOBIND_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert paths.state_dir() == tmp_path / ".local" / "state" / "topobind"


def test_relative_sites_reframe_and_kernels_folders_are_ignored(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """TOPOBIND_SITES_DIR, TOPOBIND_REFRAME_RESULTS and TOPOBIND_KERNELS_DIR are read by
    topobind and again by ReFrame and the checks, which run in other directories: a relative
    one named another folder in each. Ignored, as a relative TOPOBIND_STATE_DIR is."""
    from topobind.measure import programs

    monkeypatch.delenv("TOPOBIND_KERNELS_DIR", raising=False)
    shipped_kernels = programs.kernels_dir()
    shutil.copytree(REPO / "site_configs" / "betzy", home / "admin" / "betzy")
    monkeypatch.chdir(home)
    monkeypatch.setenv("TOPOBIND_SITES_DIR", "admin")
    monkeypatch.setenv("TOPOBIND_REFRAME_RESULTS", "rfm")
    monkeypatch.setenv("TOPOBIND_KERNELS_DIR", "bin")
    assert "local" in sites.site_names()  # the shipped sites, not ./admin's betzy alone
    assert sites.sites_dir() == REPO / "site_configs"
    assert sites.reframe_results_dir() == REPO / "results" / "reframe"
    assert programs.kernels_dir() == shipped_kernels
    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    for setting in ("TOPOBIND_SITES_DIR='admin'", "TOPOBIND_REFRAME_RESULTS='rfm'",
                    "TOPOBIND_KERNELS_DIR='bin'"):  # fmt: skip
        assert f"{setting} ignored: not an absolute path" in out
    assert f"ReFrame results and history: {REPO / 'results' / 'reframe'};" in out
    monkeypatch.setenv("TOPOBIND_SITES_DIR", str(home / "admin"))
    monkeypatch.setenv("TOPOBIND_KERNELS_DIR", str(home / "bin"))
    assert sites.site_names() == ["betzy"]
    assert programs.kernels_dir() == home / "bin"


def test_a_relative_workdir_and_mirror_are_made_absolute_where_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TOPOBIND_WORKDIR=. is what the ReFrame checks set (their stage directory), and a
    relative mirror would skip the Spack checks if ignored: both are resolved once, against
    the directory topobind starts in; the ranks and Spack get the absolute path."""
    from topobind.launch.run import workdir
    from topobind.spack_driver.locations import mirror_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOPOBIND_WORKDIR", "scratch")
    monkeypatch.setenv("TOPOBIND_OFFLINE_MIRROR", "mirror")
    assert mirror_dir() == tmp_path / "mirror"
    with pytest.raises(TopobindError, match=f"scratch directory in {tmp_path / 'scratch'}: "):
        workdir()
    (tmp_path / "scratch").mkdir()
    made = Path(workdir())
    assert made.parent == tmp_path / "scratch" and made.is_dir()
