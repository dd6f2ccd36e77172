"""Credentials inside a base_url are masked wherever the URL is shown."""

from __future__ import annotations

import pytest

from co_cli.secrets import mask_url_credentials


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://bob:hunter2@host:8080/v1", "http://***@host:8080/v1"),
        ("http://sk-token-only@host/v1", "http://***@host/v1"),
        ("https://host/v1?api-key=s3cret", "https://host/v1?api-key=***"),
        ("https://host/v1?key=s3cret&api-version=2024-06", "https://host/v1?key=***&api-version=2024-06"),
        ("https://host/v1?token=s3cret", "https://host/v1?token=***"),
        ("https://host/v1?access_token=s3cret&api_key=s4", "https://host/v1?access_token=***&api_key=***"),
        ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
        ("https://host/v1?api-version=1", "https://host/v1?api-version=1"),
    ],
)
def test_masks_userinfo_and_secret_parameters(url: str, shown: str) -> None:
    assert mask_url_credentials(url) == shown


def test_malformed_url_is_still_masked() -> None:
    shown = mask_url_credentials("http://bob:hunter2@[::1/v1?key=s3cret")
    assert "hunter2" not in shown and "s3cret" not in shown and "[::1/v1" in shown
