"""scripts/bench_timing.py: what bench-spank.py (SPANK plugin) and bench-flux.py (Flux shell
plugin) share, the summary of times and each task's system calls from an strace -f file.
Both read them from there (each had its own copy, with two different sets of file-system
calls)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest
from paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import bench_timing  # noqa: E402

TRACE = """\
100   read(3, "x", 1)                   = 1
101   openat(AT_FDCWD, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3
101   sched_setaffinity(0, 8, [0])      = 0
101   read(3,  <unfinished ...>
102   close(4)                          = 0
101   <... read resumed>"", 4096)       = 0
102   execve("/bin/true", ["/bin/true"], 0x7ffd /* 20 vars */) = 0
101   execve("/bin/true", ["/bin/true"], 0x7ffd /* 20 vars */) = 0
101   brk(NULL)                         = 0x55
100   write(1, "y", 1)                  = 1
"""


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), REPO / "scripts" / name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_tasks_calls_up_to_its_exec_of_the_program() -> None:
    tasks = bench_timing.task_calls(TRACE.splitlines(), "/bin/true")
    assert tasks == [["close"], ["openat", "sched_setaffinity", "read"]]  # pid 100: no task
    assert [bench_timing.fs_calls(t) for t in tasks] == [1, 2]
    assert bench_timing.task_calls(TRACE.splitlines(), "/bin/false") == []


def test_summary() -> None:
    got = bench_timing.summary([3.0, 1.0, 2.0, 10.0])
    assert got == {"median": 2.5, "p90": 3.0, "min": 1.0, "max": 10.0, "n": 4}


@pytest.mark.parametrize("script", ["bench-spank.py", "bench-flux.py"])
def test_both_plugin_benchmarks_take_the_shared_code(script: str) -> None:
    module = load(script)
    assert module.summary is bench_timing.summary
    assert module.task_calls is bench_timing.task_calls
    assert module.fs_calls is bench_timing.fs_calls
