"""``topobind spack check``: the project's Spack files checked by real Spack.

For each site overlay that describes this machine (every external prefix exists here):
``spack concretize -f`` of spack.yaml (which must leave spack.yaml as it was), ``spack
install --fake``; then ``spack audit packages topobind``, ``spack audit configs``, ``spack
info topobind`` and a real ``spack install`` of ``topobind~hpl+mpi`` whose dependencies are
all externals (this machine's, and a venv with the Python packages). Spack runs on a copy of
the project's files in ``build/spack/src``; each step is skipped when the hash of its inputs
is the one of its last success. A failing step prints Spack's own error and one hint."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from topobind.errors import TopobindError
from topobind.fsutil import atomic_write_text
from topobind.spack_driver.locations import OVERLAY_NAME, RECIPE_REPO, REPO, SITES, SPACK_YAML
from topobind.spack_driver.realspack import Result, Spack, files_hash

# What Spack needs of the project (the recipe builds from these; tests and docs stay out).
PROJECT_PARTS = (
    "pyproject.toml", "README.md", "spack.yaml", "src", "libtb", "kernels", "rankstep", "launchers",
    "reframe_tests", "site_configs", "spack",
)  # fmt: skip
# What the project's Makefiles build inside the copy (kept between checks, not project files).
BUILD_OUTPUTS = (
    "libtb/build/", "kernels/bin/", "kernels/build/", "rankstep/bin/", "rankstep/build/",
)  # fmt: skip
# The Python packages topobind runs with, as externals of the real install (PyPI name,
# Spack name); pip, setuptools and wheel build it.
PYTHON_EXTERNALS = (
    ("pip", "py-pip"), ("setuptools", "py-setuptools"), ("wheel", "py-wheel"),
    ("jsonschema", "py-jsonschema"), ("PyYAML", "py-pyyaml"), ("matplotlib", "py-matplotlib"),
    ("reframe-hpc", "reframe"),
)  # fmt: skip
PYPI_REQUIREMENTS = ("setuptools>=64", "wheel", "jsonschema", "pyyaml", "matplotlib",
                     "reframe-hpc>=4.9,<5")  # fmt: skip
INSTALL_SPEC = "topobind@main ~hpl +mpi"
#: the plugins the real install builds where the overlay has the scheduler as an external with
#: its headers: (package, variant, header under its prefix, the plugin installed under the prefix)
PLUGINS = (
    ("slurm", "slurm", "include/slurm/spank.h", "lib/slurm/topobind_spank.so"),
    ("flux-core", "flux", "include/flux/shell.h", "lib/flux/shell/plugins/topobind.so"),
)  # fmt: skip
MAX_FILE = 1 << 20  # a spack.yaml, an overlay or a recipe is a few KiB

# Spack's message -> what to change (first match wins).
HINTS: tuple[tuple[str, str], ...] = (
    (
        r"ordereddict\(\[\(|\{'[^']+': '",
        "YAML read a spec as a mapping because of ': ' after a version range; quote it: "
        '"hwloc@2.9: +libxml2"',
    ),
    (
        r"is not valid under any of the given schemas|Additional properties are not allowed|"
        r"is not of type",
        "a key or value in the named file is not what Spack's schema allows "
        "(e.g. view: true|false|path); compare with spack.yaml",
    ),
    (
        r"mapping values are not allowed|could not find expected|while parsing|"
        r"found character|while scanning",
        "the file is not valid YAML; quote a spec that holds ': ' (e.g. \"hwloc@2.9: +libxml2\")",
    ),
    (
        r"[Uu]nexpected (token|character)|SpecSyntaxError|SpecParseError|expected a single spec",
        "a spec string does not parse; no spaces around '=' in key=value, quote specs",
    ),
    (
        r"does not have a variant|has no such variant|variant .* does not exist|No such variant",
        "a variant is misspelt or belongs to another package: see 'spack info PACKAGE' "
        "(OpenMPI's Slurm support is schedulers=slurm)",
    ),
    (
        r"[Uu]nknown package|Package .* not found|no such package|does not exist",
        "a package name is misspelt: 'spack list NAME' shows the real one",
    ),
    (
        r"buildable: ?false|is not buildable|cannot be built|[Ee]xternal",
        "a non-buildable package (slurm, munge, pmix) needs an external in the site overlay: "
        "topobind spack externals -o site_configs/SITE/spack-packages.yaml",
    ),
    (
        r"invalid syntax|SyntaxError|IndentationError|expected ':'",
        "the recipe is not valid Python: fix the line Spack names",
    ),
    (
        r"[Cc]annot satisfy|unsatisfiable|concretization failed|conflict",
        "the constraints cannot all hold together: relax a version or variant, or change the "
        "site's externals (docs/install.md lists what works)",
    ),
)


@dataclass
class Report:
    """What a check did: steps that ran, steps skipped (cached), failures with hints."""

    ran: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    say: Callable[[str], None] = lambda line: None  # progress, as it happens


def hint_for(output: str) -> str:
    for pattern, hint in HINTS:
        if re.search(pattern, output):
            return hint
    return "see Spack's message above; docs/install.md shows a working setup"


def failure(command: str, result: Result, shown: str) -> str:
    """``SHOWN: spack COMMAND failed:``, Spack's error lines, topobind's hint."""
    lines = [f"{shown}: spack {command} failed:", *result.errors()]
    return "\n".join([*lines, f"topobind: hint: {hint_for(result.output)}"])


# --------------------------------------------------------------------------- the copy
def project_files(repo: Path = REPO) -> list[str]:
    """The project's files Spack needs (tracked or new, not ignored)."""
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-co", "--exclude-standard", "--", *PROJECT_PARTS],
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
        timeout=120,
    )
    if out.returncode != 0:
        raise TopobindError(f"git ls-files failed in {repo}: {out.stderr.strip()}")
    names = [n for n in out.stdout.splitlines() if (repo / n).is_file()]
    local = f"site_configs/local/{OVERLAY_NAME}"  # generated, ignored, still needed
    if (repo / local).is_file() and local not in names:
        names.append(local)
    return sorted(names)


def sync_copy(dest: Path, repo: Path = REPO) -> None:
    """Make ``dest`` hold the project's files; unchanged files keep their time stamps (Spack
    rebuilds a develop package whose sources changed)."""
    names = set(project_files(repo))
    for name in sorted(names):
        src, dst = repo / name, dest / name
        if dst.is_file() and dst.read_bytes() == src.read_bytes():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    for part in PROJECT_PARTS:
        base = dest / part
        stale = [f for f in base.rglob("*") if f.is_file()] if base.is_dir() else []
        for f in stale:
            rel = str(f.relative_to(dest))
            if rel not in names and not rel.startswith(BUILD_OUTPUTS):
                f.unlink()


# --------------------------------------------------------------------------- sites
def machine_overlays(sites: Path = SITES) -> tuple[list[Path], list[str]]:
    """Overlays whose externals all exist here, and a note per overlay that does not."""
    use, notes = [], []
    for path in sorted(sites.glob(f"*/{OVERLAY_NAME}")):
        try:
            packages = (yaml.safe_load(path.read_text()) or {}).get("packages") or {}
        except yaml.YAMLError:
            use.append(path)  # Spack says what is wrong with it
            continue
        prefixes = [
            str(ext.get("prefix", ""))
            for conf in packages.values()
            if isinstance(conf, dict)
            for ext in conf.get("externals") or []
            if isinstance(ext, dict)
        ]
        missing = [p for p in prefixes if not Path(p).is_dir()]
        if missing:
            notes.append(f"{path.parent.name}: not this machine ({missing[0]} does not exist)")
        else:
            use.append(path)
    return use, notes


# --------------------------------------------------------------------------- steps
class Runner:
    """Runs the steps with a cache of input hashes under ``build/spack/stamps``."""

    def __init__(self, spack: Spack, report: Report) -> None:
        self.spack = spack
        self.report = report
        self.stamps = spack.root / "stamps"

    def step(self, name: str, key: str, action: Callable[[], str | None]) -> bool:
        """Run ``action`` unless ``key`` is the key of its last success; True when fine."""
        stamp = self.stamps / re.sub(r"[^\w.-]+", "_", name)
        if stamp.is_file() and stamp.read_text() == key:
            self.report.cached.append(name)
            return True
        stamp.unlink(missing_ok=True)
        self.report.say(f"{name} ...")
        problem = action()
        if problem:
            self.report.failures.append(problem)
            return False
        self.report.ran.append(name)
        atomic_write_text(stamp, key)
        return True

    def spack_step(self, name: str, args: list[str], env: dict[str, str], shown: str) -> str:
        start = time.monotonic()
        result = self.spack.run(args, env)
        took = f"{time.monotonic() - start:.0f} s"
        shown_args = args[args.index("-e") + 2 :] if "-e" in args else args
        state = "ok" if result.ok else "FAILED"
        self.report.say(f"  spack {' '.join(shown_args)}: {state} ({took})")
        return "" if result.ok else failure(" ".join(shown_args), result, shown)


def concretize(runner: Runner, env_dir: Path, site: str, shown: str) -> str:
    """``spack -e ENV concretize -f``, which must not rewrite spack.yaml."""
    manifest = env_dir / "spack.yaml"
    before = manifest.read_bytes()
    env = {"TOPOBIND_SITE": site}
    problem = runner.spack_step(
        f"concretize ({shown})", ["-e", str(env_dir), "concretize", "-f"], env, shown
    )
    if not problem and manifest.read_bytes() != before:
        problem = (
            f"concretize ({shown}): Spack rewrote spack.yaml\ntopobind: hint: configure "
            "compilers before the first concretize (spack compiler find), as docs/install.md says"
        )
        manifest.write_bytes(before)
    return problem


def check_project(
    spack: Spack | None = None, say: Callable[[str], None] = lambda line: None
) -> Report:
    """Every step on the project's own files (see the module docstring)."""
    spack = spack or Spack()
    with spack.locked():
        return _check_project(spack, Report(say=say))


def _check_project(spack: Spack, report: Report) -> Report:
    say = report.say
    spack.prepare(say)
    runner = Runner(spack, report)
    src = spack.root / "src"
    sync_copy(src)
    overlays, report.notes = machine_overlays()
    if not overlays:
        raise TopobindError(
            "no site overlay describes this machine: make spack-local-overlay writes "
            f"site_configs/local/{OVERLAY_NAME}"
        )
    recipe = [src / "spack" / "spack_repo" / "topobind"]
    base = spack.key()
    for overlay in overlays:
        site = overlay.parent.name
        shown = f"TOPOBIND_SITE={site}"
        key = files_hash([src / "spack.yaml", src / "site_configs" / site, *recipe], base)
        lock = spack.root / "locks" / f"{site}.lock"

        def concretize_and_fake(site: str = site, shown: str = shown, lock: Path = lock) -> str:
            problem = concretize(runner, src, site, shown)
            if problem:
                return problem
            lock.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / "spack.lock", lock)
            fake = ["-c", f"config:install_tree:root:{spack.root / 'fake'}"]
            args = [*fake, "-e", str(src), "install", "--fake"]
            return runner.spack_step(
                f"install --fake ({shown})", args, {"TOPOBIND_SITE": site}, shown
            )

        runner.step(f"concretize+fake-{site}", key, concretize_and_fake)
    site = overlays[0].parent.name
    env = {"TOPOBIND_SITE": site}
    e = ["-e", str(src)]
    key = files_hash([src / "spack.yaml", *recipe, src / "site_configs" / site], base)
    for name, args in (
        ("audit packages topobind", [*e, "audit", "packages", "topobind"]),
        ("audit configs", [*e, "audit", "configs"]),
        ("info topobind", [*e, "info", "topobind"]),
    ):

        def run(n: str = name, a: list[str] = args) -> str:
            return runner.spack_step(n, a, env, f"TOPOBIND_SITE={site}")

        runner.step(name, key, run)
    real_install(runner, src, overlays[0])
    return report


# --------------------------------------------------------------------------- real install
def python_env(spack: Spack) -> Path:
    """A venv with topobind's Python dependencies: the external Python of the real install."""
    pyext = spack.root / "pyext"
    stamp = pyext / ".requirements"
    want = "\n".join(PYPI_REQUIREMENTS)
    if stamp.is_file() and stamp.read_text() == want:
        return pyext
    shutil.rmtree(pyext, ignore_errors=True)
    python = shutil.which("python3", path="/usr/bin:/bin") or "python3"
    subprocess.run([python, "-m", "venv", str(pyext)], check=True, timeout=300)
    pip = subprocess.run(
        [str(pyext / "bin" / "pip"), "install", "-q", *PYPI_REQUIREMENTS],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=900,
    )
    if pip.returncode != 0:
        raise TopobindError(f"pip install into {pyext} failed: {pip.stderr.strip()[-300:]}")
    atomic_write_text(stamp, want)
    return pyext


def _pip_versions(pyext: Path) -> dict[str, str]:
    code = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    )
    out = subprocess.run(
        [str(pyext / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        errors="replace",
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout)


def install_spec(overlay: Path) -> str:
    """:data:`INSTALL_SPEC` with each plugin of :data:`PLUGINS` on (``+slurm``, ``+flux``)
    where ``overlay`` has its scheduler as an external whose prefix holds the header, else off."""
    try:
        packages = (yaml.safe_load(overlay.read_text()) or {}).get("packages") or {}
    except (OSError, yaml.YAMLError):
        packages = {}
    spec = INSTALL_SPEC
    for package, variant, header, _plugin in PLUGINS:
        conf = packages.get(package) if isinstance(packages, dict) else None
        exts = conf.get("externals") or [] if isinstance(conf, dict) else []
        have = any(isinstance(e, dict) and (Path(str(e.get("prefix", ""))) / header).is_file()
                   for e in exts)  # fmt: skip
        spec += f" {'+' if have else '~'}{variant}"
    return spec


def install_env_yaml(src: Path, overlay: Path, pyext: Path, modules: Path | None = None) -> str:
    """spack.yaml of the real install: topobind from the copy (with the plugins the overlay's
    schedulers allow, :func:`install_spec`), every dependency external; with ``modules``, the
    environment modules (tcl) Spack writes there."""
    have = _pip_versions(pyext)
    py = subprocess.run(
        [str(pyext / "bin" / "python"), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        errors="replace",
        check=True,
        timeout=120,
    ).stdout.strip()
    make = subprocess.run(
        ["make", "--version"], capture_output=True, text=True, errors="replace", timeout=60
    ).stdout
    m = re.search(r"GNU Make (\d[\d.]*)", make)
    externals = {"python": f"python@{py}", "gmake": f"gmake@{m.group(1) if m else '4.3'}"}
    for pypi, name in PYTHON_EXTERNALS:
        externals[name] = f"{name}@{have[pypi.lower()]}"
    packages: dict[str, object] = {"all": {"buildable": False}, "topobind": {"buildable": True}}
    for name, spec in externals.items():
        prefix = "/usr" if name == "gmake" else str(pyext)
        packages[name] = {"externals": [{"spec": spec, "prefix": prefix}]}
    doc = {
        "spack": {
            "include": [{"path": str(overlay)}],
            "repos": {"topobind": str(src / "spack" / "spack_repo" / "topobind")},
            "specs": [install_spec(overlay)],
            "develop": {"topobind": {"spec": "topobind@=main", "path": str(src)}},
            "view": True,  # the site admin walkthrough of docs/install.md uses it
            "concretizer": {"unify": True},
            "packages": packages,
        }
    }
    if modules is not None:  # docs/install.md: what `module load topobind` sets
        doc["spack"]["modules"] = {
            "default": {"enable": ["tcl"], "roots": {"tcl": str(modules)}}
        }  # fmt: skip
    return "# Written by topobind spack check: the real install.\n" + yaml.safe_dump(doc)


def real_install(runner: Runner, src: Path, overlay: Path) -> None:
    spack = runner.spack
    env_dir = spack.root / "envs" / "install"
    text = install_env_yaml(src, overlay, python_env(spack), spack.root / "modules")
    if not (env_dir / "spack.yaml").is_file() or (env_dir / "spack.yaml").read_text() != text:
        atomic_write_text(env_dir / "spack.yaml", text)
    shown = f"{install_spec(overlay)}, dependencies external"
    recipe = src / "spack" / "spack_repo" / "topobind"
    key = files_hash([env_dir / "spack.yaml", recipe, overlay], spack.key())
    if not runner.step("concretize (install)", key, lambda: concretize(runner, env_dir, "", shown)):
        return
    # what the install builds in the copy (kernels/bin, ...) is no input of the install: the
    # second check of an unchanged project installs nothing
    built = tuple(str(src / p) for p in BUILD_OUTPUTS)
    key = files_hash([env_dir / "spack.lock", *(src / p for p in PROJECT_PARTS)],
                     skip=lambda f: str(f).startswith(built))  # fmt: skip

    def install() -> str:
        args = ["-e", str(env_dir), "install", "--no-checksum"]
        problem = runner.spack_step("install", args, {}, shown)
        # a develop spec reinstalled under the same hash keeps its old view links: a module
        # the project added since is in the prefix but not in the view until it is regenerated
        view = ["-e", str(env_dir), "env", "view", "regenerate"]
        problem = problem or runner.spack_step("view regenerate", view, {}, shown)
        module = ["-e", str(env_dir), "module", "tcl", "refresh", "-y"]
        problem = problem or runner.spack_step("module tcl refresh", module, {}, shown)
        return problem or smoke_test(spack, env_dir, install_spec(overlay))

    runner.step("install", key, install)


def smoke_test(spack: Spack, env_dir: Path, spec: str = INSTALL_SPEC) -> str:
    """The installed topobind runs: its CLI and a kernel from the install prefix (with the
    PYTHONPATH that Spack's environment gives it); the plugins ``spec`` turns on are there."""
    where = spack.run(["-e", str(env_dir), "location", "-i", "topobind"])
    prefix = Path(where.output.strip().splitlines()[-1]) if where.ok else Path("/nonexistent")
    plugins = [v for _p, v, _h, _f in PLUGINS if f"+{v}" in spec.split()]
    for _package, variant, _header, plugin in PLUGINS:
        if variant in plugins and not (prefix / plugin).is_file():
            return f"installed topobind +{variant}: no {plugin} in {prefix}"
    if plugins:  # what the plugins run: topobind in a clean environment (no PYTHONPATH)
        wrapper = prefix / "libexec" / "topobind" / "topobind"
        try:
            clean = {"PATH": "/usr/bin:/bin"}
            p = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True,
                               errors="replace", timeout=120, env=clean)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"installed topobind: {wrapper} does not run ({exc})"
        if p.returncode != 0:
            return f"installed topobind: {wrapper} --version in a clean environment failed: " + (
                p.stderr.strip().splitlines() or ["no message"])[-1]  # fmt: skip
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(map(str, prefix.glob("lib/python3*/site-packages")))
    for argv in (
        [str(prefix / "bin" / "topobind"), "--version"],
        [str(prefix / "bin" / "whereami")],
    ):
        try:
            p = subprocess.run(
                argv, capture_output=True, text=True, errors="replace", timeout=120, env=env
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"installed topobind: {argv[0]} does not run ({exc})"
        if p.returncode != 0:
            return f"installed topobind: {' '.join(argv)} failed: {p.stderr.strip()}"
    return ""


# --------------------------------------------------------------------------- given files
def kind(path: Path) -> str:
    """``recipe`` (``*.py``), ``env`` (YAML under ``spack:``) or ``overlay`` (other YAML)."""
    if path.suffix == ".py":
        return "recipe"
    if path.name == "spack.yaml":
        return "env"
    text = path.read_text(errors="replace")
    return "env" if re.search(r"^spack:", text, re.M) else "overlay"


def check_file(
    path: Path, spack: Spack | None = None, say: Callable[[str], None] = lambda line: None
) -> Report:
    """One file in place of its part of the project: a spack.yaml is concretized (with the
    local overlay), an overlay is concretized as a site's, a recipe is audited."""
    spack = spack or Spack()
    if not path.exists():
        raise TopobindError(f"{path}: no such file; give a spack.yaml, an overlay or a recipe")
    if not path.is_file():
        raise TopobindError(
            f"{path}: not a regular file; give a spack.yaml, an overlay or a recipe"
        )
    if path.stat().st_size > MAX_FILE:
        raise TopobindError(f"{path}: larger than {MAX_FILE // 1024} KiB, not a Spack file")
    with spack.locked():
        return _check_file(path, spack, Report(say=say))


def _check_file(path: Path, spack: Spack, report: Report) -> Report:
    say = report.say
    spack.prepare(say)
    runner = Runner(spack, report)
    scratch = spack.root / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    sync_copy(scratch)
    shown = str(path)
    what = kind(path)
    if what == "recipe":
        shutil.copyfile(
            path, scratch / RECIPE_REPO.relative_to(REPO) / "packages/topobind/package.py"
        )
        for args in (["audit", "packages", "topobind"], ["info", "topobind"]):
            problem = runner.spack_step(
                args[0], ["-e", str(scratch), *args], {"TOPOBIND_SITE": "local"}, shown
            )
            if problem:
                report.failures.append(problem)
                return report
        report.ran.append("audit+info")
        return report
    if what == "env":
        shutil.copyfile(path, scratch / SPACK_YAML.name)
        site = "local"
    else:
        site = "_check"
        (scratch / "site_configs" / site).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, scratch / "site_configs" / site / OVERLAY_NAME)
    problem = concretize(runner, scratch, site, shown)
    if problem:  # Spack names the copy; the user knows the file by its own name
        copy = scratch / ("spack.yaml" if what == "env" else f"site_configs/{site}/{OVERLAY_NAME}")
        report.failures.append(problem.replace(f"{copy}:", f"{path}:"))
    else:
        report.ran.append("concretize")
    return report
