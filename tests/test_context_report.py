"""The /context report."""

from __future__ import annotations

from pathlib import Path

from co_cli.context.offload import offload_large_outputs
from co_cli.context.report import context_report
from tests.support.messages import at, calls, reply, returns, summary_message, user


def _history() -> list:
    return [
        summary_message("[Summary of 20 earlier messages]\n" + "s" * 800),
        reply("Understood."),
        user("Please read the config.", ts=at(10**9)),
        calls(("read_file", {"path": "config.toml"}, "c1")),
        returns(("read_file", "k = v\n" * 2000, "c1")),
        reply("The config sets k to v." * 5),
        user("thanks"),
    ]


def test_report_totals_breakdown_and_largest(tmp_path: Path) -> None:
    report = context_report(
        _history(),
        context_window=100_000,
        window_source="model profile",
        threshold=0.8,
        overhead_tokens=1500,
        transcript_count=27,
        compactions=1,
        offload_dir=None,
    )
    assert report.token_source == "estimated"
    assert report.tokens_used > 1500 + 3000
    assert report.percent == 100.0 * report.tokens_used / 100_000
    assert report.threshold_tokens == 80_000
    assert report.message_count == 7 and report.transcript_count == 27 and report.compactions == 1
    assert report.breakdown["instructions+tools"] == 1500
    assert report.breakdown["tool returns"] >= 3000
    assert report.breakdown["summaries"] >= 200
    assert report.breakdown["user"] > 0 and report.breakdown["assistant"] > 0
    assert [item.kind for item in report.largest] == ["tool returns", "summaries", "assistant"]
    assert report.largest[0].label == "read_file (c1)"
    assert report.offloaded_count == 0
    text = "\n".join(report.lines())
    assert "window size: model profile" in text and "Largest: tool returns read_file (c1)" in text


def test_report_counts_offloaded_outputs(tmp_path: Path) -> None:
    offload_large_outputs(_history(), 1000, tmp_path)
    report = context_report(
        _history(),
        context_window=0,
        window_source="default",
        threshold=0.8,
        overhead_tokens=0,
        transcript_count=7,
        compactions=0,
        offload_dir=tmp_path,
    )
    assert report.offloaded_count == 1
    assert report.offloaded_chars == len("k = v\n" * 2000)
    assert report.percent == 0.0
