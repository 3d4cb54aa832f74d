"""Where topobind's files live, for a checkout and for an installed package alike.

- shipped data (read-only): ``site_configs/``, ``reframe_tests/``, ``topologies/`` and the
  built C parts (``kernels/bin/``, ``rankstep/bin/``) are folders of the installed package
  (a wheel: ``topobind/site_configs``...) or, in a checkout (an editable install), of the
  repository: :func:`data_root`, :func:`shipped`;
- the user's configuration: ``$XDG_CONFIG_HOME/topobind`` (default ``~/.config/topobind``),
  whose ``sites/`` holds the user's sites and the references ``calibrate`` measures for a
  shipped site (never written into the package): :func:`user_sites_dir`;
- the user's state: bench results, ReFrame's results, the history database, tuning records:
  ``$TOPOBIND_STATE_DIR``, else ``$XDG_STATE_HOME/topobind`` (default
  ``~/.local/state/topobind``): :func:`state_dir`. A relative value of any of these is ignored
  (the XDG rule), never read against the current directory. A checkout keeps them in ``results/`` as
  before (:func:`in_checkout`).

Nothing is created here; the writer makes the folder it writes into."""

from __future__ import annotations

import os
from pathlib import Path

#: the installed package (``.../site-packages/topobind``) or ``src/topobind`` of a checkout
PACKAGE = Path(__file__).resolve().parent
#: the checkout holding ``src/topobind`` (meaningless for an installed package)
CHECKOUT = PACKAGE.parents[1]


def in_checkout() -> bool:
    """True when this package is ``src/topobind`` of a repository (an editable install)."""
    return PACKAGE.parent.name == "src" and (CHECKOUT / "pyproject.toml").is_file()


def data_root() -> Path:
    """Where the shipped folders are: the installed package (a wheel puts ``site_configs/``,
    ``reframe_tests/``, ``topologies/``, ``kernels/bin/``, ``rankstep/bin/`` in it), or the
    checkout."""
    return CHECKOUT if in_checkout() else PACKAGE


def shipped(name: str) -> Path:
    """The shipped folder ``name`` (``site_configs``, ``reframe_tests``, ``topologies``)."""
    return data_root() / name


def in_package(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is inside the installed package (shipped, never written)."""
    # realpath, not Path.resolve(): a symlink loop is no error here (resolve raises)
    return not in_checkout() and Path(os.path.realpath(path)).is_relative_to(PACKAGE)


def _xdg(variable: str, default: str) -> Path:
    value = os.environ.get(variable, "")
    if os.path.isabs(value):  # the XDG rule: a relative value is ignored
        return Path(value)
    return Path(os.path.expanduser(default))


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/topobind`` (default ``~/.config/topobind``)."""
    return _xdg("XDG_CONFIG_HOME", "~/.config") / "topobind"


def user_sites_dir() -> Path:
    """The user's sites, and the references measured for shipped sites: ``config_dir()/sites``."""
    return config_dir() / "sites"


def state_dir() -> Path:
    """The user's state (results, history database, tuning records): ``$TOPOBIND_STATE_DIR``,
    else ``$XDG_STATE_HOME/topobind`` (default ``~/.local/state/topobind``). A relative
    ``TOPOBIND_STATE_DIR`` is ignored, as XDG ignores a relative ``XDG_STATE_HOME``: it would
    name another folder in each directory a command is started from."""
    env = os.environ.get("TOPOBIND_STATE_DIR", "")
    if os.path.isabs(env):
        return Path(env)
    return _xdg("XDG_STATE_HOME", "~/.local/state") / "topobind"


def ignored_settings() -> list[str]:
    """The location variables set to a relative path, hence ignored (``--version`` says so)."""
    names = ("TOPOBIND_STATE_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME")
    values = {n: os.environ.get(n, "") for n in names}
    return [f"{n}={v!r}" for n, v in values.items() if v and not os.path.isabs(v)]


def sites_dirs() -> list[Path]:
    """Where sites are read, first match of a name wins: ``$TOPOBIND_SITES_DIR`` (a site's
    or a Spack install's folder; it replaces the shipped sites), the user's sites, then the
    shipped ones."""
    env = os.environ.get("TOPOBIND_SITES_DIR")
    return [Path(env), user_sites_dir()] if env else [user_sites_dir(), shipped("site_configs")]


def reframe_results_default() -> Path:
    """ReFrame's reports, perflogs and results database (the history) when
    ``$TOPOBIND_REFRAME_RESULTS`` is unset: a checkout's ``results/reframe`` (as before), else
    ``state_dir()/reframe``."""
    return CHECKOUT / "results" / "reframe" if in_checkout() else state_dir() / "reframe"


def bench_results_default() -> Path:
    """``topobind bench``'s results without ``--results``: ``./results`` in a checkout (as
    before), else ``state_dir()/results``."""
    return Path("results") if in_checkout() else state_dir() / "results"


def locations_line() -> str:
    """One line saying where each kind of file lives (``topobind --version`` prints it)."""
    env = os.environ.get("TOPOBIND_REFRAME_RESULTS")
    reframe = Path(env) if env else reframe_results_default()
    bench = bench_results_default()
    return (
        f"sites: {', '.join(map(str, sites_dirs()))}; references of shipped sites: "
        f"{user_sites_dir()}; state: {state_dir()} (tuning records); bench results: "
        f"{bench if bench.is_absolute() else f'./{bench}'}; ReFrame results and history: "
        f"{reframe}" + "".join(f"; {v} ignored: not an absolute path" for v in ignored_settings())
    )
