"""The one process runner of topobind: run, verify, bench, the kernels and HPL start here.

The command runs in a new session (its own process group). Ctrl-C / SIGTERM sent to topobind
are passed to the whole group; on a timeout the group is killed and a TopobindError raised;
when the command ends, whatever it left in its group is killed, so nothing keeps running.
``heartbeat``: call ``on_heartbeat(elapsed_seconds)`` every so many seconds while it runs.

:func:`capture` runs the short tools of start-up (hwloc's lstopo for a live or synthetic
topology) without the ``subprocess`` module: importing it (with ``threading``, ``signal``,
``selectors``, ``locale`` and ``re``) costs about 10 ms of every ``topobind plan`` on a node.
"""

from __future__ import annotations

import os
import time

from topobind.errors import CannotRun, TopobindError

TYPE_CHECKING = False  # typing costs a few ms at start-up: annotations only
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

_SIGKILL = 9  # (signal.SIGKILL: the signal module imports enum, ~2 ms)


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    capture: bool = False,
    capture_stderr: bool = False,
    heartbeat: float | None = None,
    on_heartbeat: Callable[[float], None] | None = None,
    what: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; stdout (and stderr) captured as text when asked. A command that cannot
    be started raises :class:`CannotRun` (exit 127/126, as a shell says it)."""
    import contextlib
    import signal
    import subprocess
    import threading

    try:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            text=True,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE if capture_stderr else None,
        )
    except OSError as exc:
        raise CannotRun(argv[0], exc) from exc

    def stop(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)

    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    t0 = time.monotonic()
    try:
        while True:
            left = None if timeout is None else timeout - (time.monotonic() - t0)
            if left is not None and left <= 0:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise TopobindError(
                    f"{what or os.path.basename(argv[0])} did not finish within {timeout:g} s"
                )
            wait = min(x for x in (left, heartbeat, 1e9) if x is not None)
            try:
                out, err = proc.communicate(timeout=wait if (left or heartbeat) else None)
                break
            except subprocess.TimeoutExpired:
                if on_heartbeat is not None and heartbeat is not None:
                    on_heartbeat(time.monotonic() - t0)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # nothing left running
    return subprocess.CompletedProcess(list(argv), proc.returncode, out or "", err or "")


def capture(argv: Sequence[str], timeout: float, what: str) -> tuple[int, str, str]:
    """Run a short tool found on PATH; (exit status, stdout, stderr), as text. Killed after
    ``timeout`` seconds (:class:`TopobindError` naming ``what``); a tool that cannot be
    started raises :class:`CannotRun`."""
    import select

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = os.posix_spawnp(
            argv[0],
            list(argv),
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)],
        )
    except OSError as exc:
        for fd in (out_r, err_r):
            os.close(fd)
        raise CannotRun(argv[0], exc) from exc
    finally:
        os.close(out_w)
        os.close(err_w)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    try:
        _drain(
            select,
            pid,
            chunks,
            time.monotonic() + timeout,
            f"{what} did not finish within {timeout:g} s",
        )
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        for fd in chunks:
            os.close(fd)
    out, err = (b"".join(chunks[fd]).decode(errors="replace") for fd in (out_r, err_r))
    return status, out, err


def _drain(
    select: Any, pid: int, chunks: dict[int, list[bytes]], deadline: float, late: str
) -> None:
    """Read both pipes of ``chunks`` to their end (neither can fill and stall the tool); past
    ``deadline`` the tool is killed and :class:`TopobindError` says ``late``."""
    poll = select.poll()
    for fd in chunks:
        poll.register(fd, select.POLLIN)
    left_open = set(chunks)
    while left_open:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, _SIGKILL)
            os.waitpid(pid, 0)
            raise TopobindError(late)
        for fd, _event in poll.poll(left * 1000):
            data = os.read(fd, 1 << 16)
            if data:
                chunks[fd].append(data)
            else:
                poll.unregister(fd)
                left_open.discard(fd)
