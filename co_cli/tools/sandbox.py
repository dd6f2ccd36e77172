"""The sandbox run_shell runs commands in (Linux, with bubblewrap): the whole file system read-only but the working
directory and co's temporary directory, and no network unless ``shell_network`` allows it.

bubblewrap (``bwrap``, Debian's ``bubblewrap`` package) is an optional system package. Whether it can run here is
found by trying it once (``probe``), with the options a command gets: inside some containers user namespaces
are not allowed and it fails. The answer is kept for the life of the process. With ``shell_sandbox`` "auto" and
no working bubblewrap, commands run as they would in the user's shell, and co says so once per session; with
"on", they do not run at all.

Inside the sandbox the command sees the same files at the same paths: ``/`` is bound read-only, then the working
directory and co's temporary directory (``TMPDIR``) writable, then co's own files that lie inside them
(``.co-cli/`` of the project) read-only again. It has its own ``/dev`` and ``/proc``, a pid namespace of its own
(when the command ends, or co, everything it started ends with it) and, without network, a network namespace with
only a loopback interface of its own.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

BWRAP = "bwrap"
PROBE_SECONDS = 10.0
INSTALL_HINT = "install bubblewrap (`apt install bubblewrap`)"
SANDBOX_FAILURE_MARKS = (
    "Read-only file system",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
    "No address associated with hostname",
)
"""What a command prints when the sandbox stopped it: a write outside its writable directories, a network
address or host name it cannot reach."""
OFFLINE_FAILURE_MARKS = ("Connection refused",)
"""Without network a server on this machine is out of reach too (the sandbox has a loopback of its own)."""

SandboxMode = Literal["auto", "on", "off"]


@dataclass(frozen=True)
class Confinement:
    """How one command runs: the words put before ``bash -c COMMAND`` (none: not sandboxed) and why."""

    prefix: tuple[str, ...]
    network: bool
    writable: tuple[Path, ...]
    unavailable: str = ""
    """Why there is no sandbox though one was wanted ("" when sandboxed, or when not wanted)."""

    @property
    def sandboxed(self) -> bool:
        return bool(self.prefix)

    def describe(self) -> str:
        """A few words for the approval question."""
        if not self.sandboxed:
            return "not sandboxed" + (f": {self.unavailable}" if self.unavailable else "")
        return "sandboxed: writes only in the working directory and TMPDIR" + ("" if self.network else ", no network")


def bwrap_arguments(cwd: Path, temp_dir: Path, network: bool, read_only: tuple[Path, ...] = ()) -> list[str]:
    """bubblewrap's options for a command run in ``cwd``: everything read-only but ``cwd`` and ``temp_dir``, then
    ``read_only`` (paths inside them that must stay read-only) bound read-only again."""
    arguments = [BWRAP, "--die-with-parent", "--unshare-pid"]
    if not network:
        arguments.append("--unshare-net")
    arguments += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in (cwd, temp_dir):
        arguments += ["--bind", str(path), str(path)]
    for path in read_only:
        if path.exists():
            arguments += ["--ro-bind", str(path), str(path)]
    arguments += ["--setenv", "TMPDIR", str(temp_dir), "--chdir", str(cwd), "--"]
    return arguments


@functools.cache
def probe(network: bool) -> str:
    """Why bubblewrap cannot sandbox a command here ("" when it can): tried once per process with the options a
    command gets (``bwrap ... true``)."""
    if not sys.platform.startswith("linux"):
        return f"sandboxing needs Linux and bubblewrap (this is {sys.platform})"
    if shutil.which(BWRAP) is None:
        return f"bubblewrap is not installed; {INSTALL_HINT}"
    here = Path(tempfile.gettempdir())
    try:
        done = subprocess.run(
            [*bwrap_arguments(here, here, network), "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap does not run here ({exc})"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return "bubblewrap cannot run here" + (f" ({said[-1]})" if said else "") + " (user namespaces not allowed?)"
    return ""


TEMP_PREFIX = "co-shell-"


@functools.cache
def temp_dir() -> Path:
    """co's temporary directory for sandboxed commands (``TMPDIR`` inside the sandbox): one per process, private
    (0700), named by the process's id, removed when co exits; those a co killed without its exit left (its
    process is gone) are removed first."""
    remove_orphans(Path(tempfile.gettempdir()))
    path = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def remove_orphans(parent: Path) -> None:
    """Remove the temporary directories under ``parent`` that this user's co processes made and that no
    running process holds any more (the process whose id the name carries is gone)."""
    for path in parent.glob(f"{TEMP_PREFIX}*-*"):
        pid = path.name.removeprefix(TEMP_PREFIX).split("-", 1)[0]
        try:
            if not pid.isdigit() or path.is_symlink() or path.stat().st_uid != os.getuid() or _alive(int(pid)):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that id: alive
        return True
    return True


def confinement(mode: SandboxMode, network: bool, cwd: Path, read_only: tuple[Path, ...] = ()) -> Confinement:
    """How a command in ``cwd`` runs under ``mode`` ("off": as in the user's shell; "auto": sandboxed where
    bubblewrap runs, else not, with the reason; "on": sandboxed, or not at all: check ``unavailable``)."""
    if mode == "off":
        return Confinement((), True, ())
    reason = probe(network)
    if reason:
        return Confinement((), True, (), unavailable=reason)
    temp = temp_dir()
    return Confinement(tuple(bwrap_arguments(cwd, temp, network, read_only)), network, (cwd, temp))


def blocked_by_sandbox(confined: Confinement, exit_code: int | None, output: str) -> bool:
    """Whether a failed sandboxed command says what a write outside its directories or a network access says."""
    if not confined.sandboxed or exit_code == 0:
        return False
    marks = SANDBOX_FAILURE_MARKS + (() if confined.network else OFFLINE_FAILURE_MARKS)
    return any(mark in output for mark in marks)
