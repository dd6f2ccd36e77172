"""request_timeout bounds the whole wait for an answer, not each of the provider SDK's attempts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.co_process import run_co
from tests.support.scripted_server import Hang, Reply, ScriptedServer

pytestmark = pytest.mark.e2e

TIMEOUT = 2.0


def test_hung_server_is_reported_after_one_timeout(
    co_server_env: dict[str, str], scripted_server: ScriptedServer, workdir: Path
) -> None:
    arrivals: list[float] = []

    def hang(request: dict[str, Any]) -> Reply:
        arrivals.append(time.monotonic())
        return Hang(30)

    scripted_server.responder = hang
    env = {**co_server_env, "CO_CLI_REQUEST_TIMEOUT": str(TIMEOUT)}
    result = run_co(["chat", "-p", "are you there?"], env, workdir, timeout=60)
    waited = time.monotonic() - arrivals[0]
    assert result.returncode == 1, result.stderr
    assert "timed out" in result.stderr and "Traceback" not in result.stderr
    # The SDK's default two retries would send the request three times and take about 3 x TIMEOUT (plus
    # back-off); the bound leaves room for co's exit on a busy machine (``waited`` runs to the process's end).
    assert len(arrivals) == 1
    assert TIMEOUT * 0.9 <= waited < TIMEOUT * 2.5, waited
