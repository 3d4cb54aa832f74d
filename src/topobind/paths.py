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
  ``~/.local/state/topobind``): :func:`state_dir`. A checkout keeps them in ``results/`` as
  before (:func:`in_checkout`).

A relative value of a location variable (:data:`LOCATIONS`) is ignored (the XDG rule), never
read against the current directory: it would name another folder in each directory a command
(or ReFrame, or a job's rank) starts in; :func:`location` reads one, ``topobind --version``
names each one ignored.

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


#: the variables naming a folder that a relative value of is ignored (empty: unset)
LOCATIONS = ("TOPOBIND_STATE_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "TOPOBIND_SITES_DIR",
             "TOPOBIND_REFRAME_RESULTS", "TOPOBIND_KERNELS_DIR")  # fmt: skip


def location(variable: str) -> Path | None:
    """The folder ``$variable`` names, or None when it is unset, empty or relative."""
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else None


def _xdg(variable: str, default: str) -> Path:
    return location(variable) or Path(os.path.expanduser(default))


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
    return location("TOPOBIND_STATE_DIR") or _xdg("XDG_STATE_HOME", "~/.local/state") / "topobind"


def ignored_settings() -> list[str]:
    """The location variables set to a relative path, hence ignored (``--version`` says so)."""
    values = {n: os.environ.get(n, "") for n in LOCATIONS}
    return [f"{n}={v!r}" for n, v in values.items() if v and not os.path.isabs(v)]


def sites_dirs() -> list[Path]:
    """Where sites are read, first match of a name wins: ``$TOPOBIND_SITES_DIR`` (a site's
    or a Spack install's folder; it replaces the shipped sites), the user's sites, then the
    shipped ones. A relative ``TOPOBIND_SITES_DIR`` is ignored (ReFrame reads it too, from
    its own directory)."""
    env = location("TOPOBIND_SITES_DIR")
    return [env, user_sites_dir()] if env else [user_sites_dir(), shipped("site_configs")]


def reframe_results_default() -> Path:
    """ReFrame's reports, perflogs and results database (the history) when
    ``$TOPOBIND_REFRAME_RESULTS`` is unset (or relative, hence ignored): a checkout's
    ``results/reframe`` (as before), else ``state_dir()/reframe``."""
    return CHECKOUT / "results" / "reframe" if in_checkout() else state_dir() / "reframe"


def bench_results_default() -> Path:
    """``topobind bench``'s results without ``--results``: ``./results`` in a checkout (as
    before), else ``state_dir()/results``."""
    return Path("results") if in_checkout() else state_dir() / "results"


def locations_line() -> str:
    """One line saying where each kind of file lives (``topobind --version`` prints it)."""
    reframe = location("TOPOBIND_REFRAME_RESULTS") or reframe_results_default()
    bench = bench_results_default()
    return (
        f"sites: {', '.join(map(str, sites_dirs()))}; references of shipped sites: "
        f"{user_sites_dir()}; state: {state_dir()} (tuning records); bench results: "
        f"{bench if bench.is_absolute() else f'./{bench}'}; ReFrame results and history: "
        f"{reframe}" + "".join(f"; {v} ignored: not an absolute path" for v in ignored_settings())
    )
