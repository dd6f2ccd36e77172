"""`co serve` run for real in a subprocess, on a free port of 127.0.0.1, pointed at a scripted model server."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

TOKEN = "serve-test-token-0123456789"


def co_command(*args: str) -> list[str]:
    """``co`` from this checkout (``python -m co_cli``), whatever is installed."""
    return [sys.executable, "-m", "co_cli", *args]


@dataclass
class ServeProcess:
    """A running `co serve`; ``url`` (no trailing slash) and ``token``, and ``co(...)`` to run co with the same
    settings (`co sessions list`, `co chat --resume`)."""

    env: dict[str, str]
    cwd: Path
    token: str = TOKEN
    """CO_CLI_SERVE_TOKEN for the server; empty: none, the server makes its own (read it from its banner)."""
    url: str = ""
    process: subprocess.Popen[str] | None = None
    banner: list[str] = field(default_factory=list)
    links_taken: int = 0
    program: list[str] = field(default_factory=co_command)
    """What runs co (``python -m co_cli``; a test may start a script that changes one of co's parts first)."""

    def start(self, *args: str, timeout: float = 60.0) -> ServeProcess:
        env = {**self.env, "PYTHONUNBUFFERED": "1"}
        if self.token:
            env["CO_CLI_SERVE_TOKEN"] = self.token
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        self.process = subprocess.Popen(
            [*self.program, "serve", "--port", "0", *args],
            env=env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"co serve ended: {self.process.stderr.read() if self.process.stderr else ''}")
            self.banner.append(line)
            if line.startswith("co serve: "):
                self.url = line.split()[2]
            if line.startswith("Ctrl-C"):
                return self
        raise RuntimeError("co serve did not start")

    def sign_in_link(self) -> str:
        """The browser's one-time sign-in link of the banner."""
        line = next(line for line in self.banner if line.lstrip().startswith("browser:"))
        return line.split()[1]

    def take_link(self) -> str:
        """A sign-in link not used yet, for a browser that will use it: the banner's first, then each one the
        server prints when the one before was used."""
        if not self.links_taken:
            link = self.sign_in_link()
        else:
            printed = self.next_line()
            assert "a browser signed in" in printed, printed
            link = printed.rsplit(" ", 1)[1].strip()
        self.links_taken += 1
        return link

    def next_line(self, timeout: float = 10.0) -> str:
        """The next line the server prints after its banner (e.g. the link for the next browser)."""
        assert self.process is not None and self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise AssertionError(f"co serve printed nothing in {timeout} s")
        return self.process.stdout.readline()

    def stop(self) -> str:
        """Stop it as Ctrl-C does; its stderr."""
        if self.process is None:
            return ""
        self.process.send_signal(2)
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return err

    def client(self, **kwargs: Any) -> Any:
        import openai

        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=kwargs.pop("api_key", self.token), **kwargs)

    def co(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        return subprocess.run(co_command(*args), env=env, cwd=self.cwd, capture_output=True, text=True, timeout=timeout)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def serve_env(base: dict[str, str], data: Path, config: Path, base_url: str) -> dict[str, str]:
    """The environment of a co pointed at the scripted server (model ``scripted``), in its own directories."""
    env = {k: v for k, v in base.items() if not (k.startswith("CO_CLI_") or k.endswith("_API_KEY"))}
    env.update(
        {
            "CO_CLI_DATA_DIR": str(data),
            "CO_CLI_CONFIG_DIR": str(config),
            "CO_CLI_BASE_URL": base_url,
            "CO_CLI_MODEL": "scripted",
            "CO_CLI_API_KEY": "test-key",
            "CO_CLI_MEMORY_EXTRACT": "off",
            "CO_CLI_AUTO_TITLE": "false",
        }
    )
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    return env
