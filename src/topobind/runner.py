"""The one process runner of topobind: run, verify, bench, the kernels and HPL start here.

The command runs in a new session (its own process group). Ctrl-C / SIGTERM sent to topobind
are passed to the whole group; on a timeout the group is killed and a TopobindError raised;
when the command ends, whatever it left in its group is killed, so nothing keeps running.
``heartbeat``: call ``on_heartbeat(elapsed_seconds)`` every so many seconds while it runs.

:func:`capture` runs the short tools a plan needs (hwloc's lstopo for a live or synthetic
topology) with a timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from topobind.errors import CannotRun, TopobindError


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

    proc: subprocess.Popen[str] | None = None
    got: list[int] = []  # the signals topobind received while the command ran

    def stop(signum: int, _frame: object) -> None:
        got.append(signum)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)

    # The handlers come before the start: a Ctrl-C while the command starts is passed on too.
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    t0 = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(
                list(argv),
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                text=True,
                errors="replace",
                stdout=subprocess.PIPE if capture else None,
                stderr=subprocess.PIPE if capture_stderr else None,
            )
        except OSError as exc:
            raise CannotRun(argv[0], exc) from exc
        for s in list(got):  # received while it started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, s)
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
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # nothing left running
    _pass_on_late_signal(got, proc.returncode, old)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out or "", err or "")


def _pass_on_late_signal(got: list[int], returncode: int, old: dict[int, object]) -> None:
    """A signal that came when the command had already ended (topobind had not yet seen it
    end: a loaded machine) reached no process: pass it to the handler the caller had set
    (e.g. :func:`topobind.interrupt.stop_on_signals` around a launch and the wait after it),
    so Ctrl-C is not lost. A command that the signal ended reports it in its status."""
    if not got or returncode in (-got[-1], 128 + got[-1]):
        return
    handler = old.get(got[-1])
    if callable(handler) and handler is not signal.default_int_handler:
        signal.raise_signal(got[-1])


#: the most a short tool may print on each of stdout and stderr (the 384-PU node's lstopo XML
#: is 0.3 MiB; a flux R of 16 MiB is refused by its reader)
CAPTURE_LIMIT = 64 << 20


def capture(
    argv: Sequence[str],
    timeout: float,
    what: str,
    env: dict[str, str] | None = None,
    limit: int = CAPTURE_LIMIT,
) -> tuple[int, str, str]:
    """Run a short tool found on PATH (hwloc's lstopo); (exit status, stdout, stderr), as
    text (undecodable bytes replaced). Bounded in time and size: killed, with everything it
    started in its session, after ``timeout`` seconds or once it printed more than ``limit``
    bytes on either stream (:class:`TopobindError` naming ``what``); a grandchild holding
    the pipes open does not keep topobind waiting. A tool that cannot be started raises
    :class:`CannotRun`. ``env``: its environment (None: ours)."""
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise CannotRun(argv[0], exc) from exc
    try:
        out, err = _read_bounded(proc, time.monotonic() + timeout, limit, what, timeout)
        status = proc.wait(timeout=max(0.0, timeout))
    except subprocess.TimeoutExpired as exc:
        raise TopobindError(f"{what} did not finish within {timeout:g} s") from exc
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # nothing left running
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    return status, out.decode(errors="replace"), err.decode(errors="replace")


def _read_bounded(proc: subprocess.Popen[bytes], deadline: float, limit: int, what: str,
                  timeout: float) -> tuple[bytes, bytes]:  # fmt: skip
    """Both pipes of ``proc`` read to their end, at most ``limit`` bytes each, by ``deadline``."""
    import selectors  # only where a short tool is run

    got = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    with selectors.DefaultSelector() as sel:
        for pipe in got:
            sel.register(pipe, selectors.EVENT_READ)
        ended: float | None = None  # when the tool itself ended (its pipes may stay open)
        while sel.get_map():
            now = time.monotonic()
            if ended is None and proc.poll() is not None:
                ended = now
            if ended is not None and now - ended > 0.5:
                break  # a grandchild holds the pipes: what the tool printed is all there is
            if now >= deadline:
                raise subprocess.TimeoutExpired(what, timeout)
            for key, _ in sel.select(min(deadline - now, 0.1)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = got[key.fileobj]
                buf += chunk
                if len(buf) > limit:
                    raise TopobindError(f"{what} printed more than {limit >> 20} MiB; stopped")
    return bytes(got[proc.stdout]), bytes(got[proc.stderr])
