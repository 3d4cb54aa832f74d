"""The one process runner of topobind: run, verify, bench, the kernels and HPL start here.

The command runs in a new session (its own process group). Ctrl-C / SIGTERM sent to topobind
are passed to the whole group; on a timeout the group is killed and a TopobindError raised;
when the command ends, whatever it left in its group is killed, so nothing keeps running.
``heartbeat``: call ``on_heartbeat(elapsed_seconds)`` every so many seconds while it runs.
A captured stream is read up to :data:`CAPTURE_LIMIT` bytes (``limit``): past it the command
is killed with its session and a TopobindError names it and the limit.

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
    limit: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; stdout (and stderr) captured as text when asked (undecodable bytes
    replaced), at most ``limit`` bytes a stream (default :data:`CAPTURE_LIMIT`): past it the
    command is killed with its session and :class:`TopobindError` names it and the limit. A
    command that cannot be started raises :class:`CannotRun` (exit 127/126, as a shell says
    it)."""

    proc: subprocess.Popen[bytes] | None = None
    got: list[int] = []  # the signals topobind received while the command ran
    name = what or os.path.basename(argv[0])

    def stop(signum: int, _frame: object) -> None:
        got.append(signum)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signum)

    # The handlers come before the start: a Ctrl-C while the command starts is passed on too.
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    t0 = time.monotonic()
    deadline = None if timeout is None else t0 + timeout
    beat = _Heartbeat(t0, heartbeat, on_heartbeat)
    out = err = b""
    try:
        try:
            proc = subprocess.Popen(
                list(argv),
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                stdout=subprocess.PIPE if capture else None,
                stderr=subprocess.PIPE if capture_stderr else None,
            )
        except OSError as exc:
            raise CannotRun(argv[0], exc) from exc
        for s in list(got):  # received while it started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, s)
        try:
            if capture or capture_stderr:
                out, err = _read_bounded(proc, deadline, limit or CAPTURE_LIMIT, name, beat)
            _wait(proc, deadline, beat)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise TopobindError(f"{name} did not finish within {timeout:g} s") from None
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if proc is not None:
            _reap(proc)
    _pass_on_late_signal(got, proc.returncode, old)
    return subprocess.CompletedProcess(list(argv), proc.returncode, _text(out), _text(err))


def _text(data: bytes) -> str:
    """A child's output as text, as ``text=True`` read it: bytes not UTF-8 replaced, line
    ends made ``\\n``."""
    return data.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


class _Heartbeat:
    """Calls ``on_heartbeat(elapsed)`` each ``every`` seconds, when asked by :meth:`tick`."""

    def __init__(self, t0: float, every: float | None, call: Callable[[float], None] | None):
        self.t0, self.every, self.call = t0, every, call
        self.next = None if every is None or call is None else t0 + every

    def wait(self, deadline: float | None) -> float | None:
        """Seconds to the next heartbeat or the deadline (None: no bound)."""
        ends = [x for x in (self.next, deadline) if x is not None]
        return max(0.0, min(ends) - time.monotonic()) if ends else None

    def tick(self) -> None:
        now = time.monotonic()
        if self.next is not None and self.call is not None and now >= self.next:
            self.call(now - self.t0)
            while self.next <= now:
                self.next += self.every or 1.0


def _wait(proc: subprocess.Popen[bytes], deadline: float | None, beat: _Heartbeat) -> None:
    """Wait for ``proc`` to end, with heartbeats; TimeoutExpired past ``deadline``."""
    while True:
        if deadline is not None and time.monotonic() >= deadline:
            raise subprocess.TimeoutExpired(proc.args, 0)
        try:
            proc.wait(timeout=beat.wait(deadline))
            return
        except subprocess.TimeoutExpired:
            beat.tick()


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


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of ``proc``'s session, close its pipes and collect it (5 s at most)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # nothing left running
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


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
        out, err = _read_bounded(proc, time.monotonic() + timeout, limit, what)
        status = proc.wait(timeout=max(0.0, timeout))
    except subprocess.TimeoutExpired as exc:
        raise TopobindError(f"{what} did not finish within {timeout:g} s") from exc
    finally:
        _reap(proc)
    return status, out.decode(errors="replace"), err.decode(errors="replace")


def _read_bounded(proc: subprocess.Popen[bytes], deadline: float | None, limit: int, what: str,
                  beat: _Heartbeat | None = None) -> tuple[bytes, bytes]:  # fmt: skip
    """The pipes of ``proc`` (stdout, stderr; None: not piped) read to their end, at most
    ``limit`` bytes each, by ``deadline`` (TimeoutExpired after it); ``beat`` ticked."""
    import selectors  # only where a child's output is read

    pipes = [p for p in (proc.stdout, proc.stderr) if p is not None]
    # chunks kept as read and joined once: a bytearray grown by += left the old copies of
    # its buffer in the heap (peak 321 MiB for 64 MiB read, under load)
    got: dict[object, list[bytes]] = {p: [] for p in pipes}
    size = dict.fromkeys(pipes, 0)
    with selectors.DefaultSelector() as sel:
        for pipe in pipes:
            sel.register(pipe, selectors.EVENT_READ)
        ended: float | None = None  # when the child itself ended (its pipes may stay open)
        while sel.get_map():
            now = time.monotonic()
            if ended is None and proc.poll() is not None:
                ended = now
            if ended is not None and now - ended > 0.5:
                break  # a grandchild holds the pipes: what the child printed is all there is
            if deadline is not None and now >= deadline:
                raise subprocess.TimeoutExpired(what, 0)
            if beat is not None:
                beat.tick()
            wait = 0.1 if deadline is None else min(deadline - now, 0.1)
            for key, _ in sel.select(wait):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                got[key.fileobj].append(chunk)
                size[key.fileobj] += len(chunk)
                if size[key.fileobj] > limit:
                    stream = "stdout" if key.fileobj is proc.stdout else "stderr"
                    raise TopobindError(
                        f"{what} printed more than {_size(limit)} on its {stream} (the most "
                        "topobind reads of a command's output); stopped"
                    )
    return (b"".join(got.pop(proc.stdout)) if proc.stdout else b"",
            b"".join(got.pop(proc.stderr)) if proc.stderr else b"")  # fmt: skip


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n} bytes"
