"""Network namespaces and the processes inside them: create, run, and remove everything with the lab's prefix.

Everything the lab makes is named ``swlab-*`` and lives inside namespaces it creates: veth pairs are created
directly in them (never in the host's namespace), and every process it starts runs inside one of them
(``ip netns exec``). So cleanup needs no record of the run that made them: kill every process in a
``swlab-*`` namespace (``ip netns pids``), then delete the namespaces, which removes their links, routes
and qdiscs with them. A second run after a killed one starts with exactly that.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from collector.errors import SpanwatchError

log = logging.getLogger("spanwatch.lab")

PREFIX = "swlab-"
LOCK = Path("/run/spanwatch-lab.lock")
KILL_GRACE_S = 3.0


class LabError(SpanwatchError):
    """The lab could not be built or run; the message is one line."""


def run(argv: Sequence[str], check: bool = True, timeout: float = 30.0) -> str:
    """Run a command, returning its stdout; a failure raises ``LabError`` with its first stderr line."""
    log.debug("lab: %s", " ".join(argv))
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        first = (done.stderr or done.stdout).strip().splitlines()
        raise LabError(f"{' '.join(argv)}: {first[0] if first else f'exit {done.returncode}'}")
    return done.stdout


def exec_in(ns: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside namespace ``ns``."""
    return ["ip", "netns", "exec", ns, *argv]


def namespaces() -> list[str]:
    """The lab's namespaces that exist now (ours or a killed run's)."""
    out = run(["ip", "netns", "list"], check=False)
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(PREFIX))


def pids(ns: str) -> list[int]:
    """Processes running inside ``ns``."""
    out = run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in out.split() if p.isdigit() and int(p) != os.getpid()]


def _signal_all(targets: list[int], sig: int) -> None:
    for pid in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def cleanup() -> list[str]:
    """Kill every process in a lab namespace and delete the namespaces; returns the names removed."""
    names = namespaces()
    victims = [p for ns in names for p in pids(ns)]
    if victims:
        _signal_all(victims, signal.SIGTERM)
        deadline = time.monotonic() + KILL_GRACE_S
        while time.monotonic() < deadline and any(_alive(p) for p in victims):
            time.sleep(0.05)
        _signal_all([p for p in victims if _alive(p)], signal.SIGKILL)
    for ns in names:
        run(["ip", "netns", "del", ns], check=False)
    if names:
        log.info("lab: removed %d namespace(s) and %d process(es)", len(names), len(victims))
    return names


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of ours is dead for this purpose; reap it.
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    return True


def can_create() -> str | None:
    """None when this process can create a namespace, else why not (one line)."""
    if os.geteuid() != 0:
        return "spanwatch lab needs root (it creates network namespaces, veth pairs and qdiscs)"
    probe = f"{PREFIX}probe-{os.getpid()}"
    try:
        run(["ip", "netns", "add", probe])
    except (LabError, OSError, subprocess.TimeoutExpired) as e:
        return f"cannot create a network namespace: {e}"
    run(["ip", "netns", "del", probe], check=False)
    return None


def netem_available() -> bool:
    """Whether this kernel has ``netem`` (tried on the loopback of a throwaway namespace)."""
    probe = f"{PREFIX}netem-{os.getpid()}"
    run(["ip", "netns", "add", probe])
    try:
        run(["ip", "-n", probe, "link", "set", "lo", "up"])
        run(["tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"])
        return True
    except LabError:
        return False
    finally:
        run(["ip", "netns", "del", probe], check=False)


class Lock:
    """One lab per machine: a second one would remove the first one's namespaces."""

    def __init__(self, path: Path = LOCK) -> None:
        self.path = path
        self.file: IO[str] | None = None

    def __enter__(self) -> Lock:
        self.file = self.path.open("a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.close()
            raise LabError(f"another spanwatch lab is running (lock {self.path})") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            fcntl.flock(self.file, fcntl.LOCK_UN)
            self.file.close()


class Process:
    """A process started inside a lab namespace, its output in a log file; stopped by its own pid."""

    def __init__(
        self, name: str, ns: str, argv: Sequence[str], logs: Path, env: dict[str, str] | None = None
    ):
        self.name = name
        self.log_path = logs / f"{name}.log"
        self._log = self.log_path.open("w")
        full_env = {**os.environ, **(env or {})}
        log.debug("lab: start %s in %s: %s", name, ns, " ".join(argv))
        # Its own session: a Ctrl-C at the terminal reaches the lab, which stops everything in order.
        self.popen = subprocess.Popen(
            exec_in(ns, argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = KILL_GRACE_S) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit status."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.kill()
                self.popen.wait(grace)
        self._log.close()
        return self.popen.returncode

    def tail(self, lines: int = 5) -> str:
        """The last lines of its output (for error messages)."""
        with contextlib.suppress(OSError):
            return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])
        return ""
