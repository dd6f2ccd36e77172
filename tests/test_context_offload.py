"""Offloading very large tool results to private files and reading them back."""

from __future__ import annotations

import copy
import json
import stat
from pathlib import Path

import pytest
from pydantic_ai.messages import ToolReturnPart

from co_cli.context.offload import (
    STORED_OUTPUT_CEILING,
    bound_for_transcript,
    last_tool_output,
    list_offloaded,
    offload_large_outputs,
    offloaded_refs,
    read_tool_output,
    ref_for,
)
from tests.support.messages import calls, reply, returns, user

BIG = "\n".join(f"line {i:04d} " + "x" * 40 for i in range(1000))


def _history(content: object = BIG, call_id: str = "call_1") -> list:
    return [user("q"), calls(("run", {}, call_id)), returns(("run", content, call_id)), reply("ok"), user("next")]


def _content(history: list) -> str:
    part = history[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    return part.content


def test_large_output_is_saved_privately_and_previewed(tmp_path: Path) -> None:
    directory = tmp_path / "outputs"
    out = offload_large_outputs(_history(), 10_000, directory)
    shown = _content(out)
    assert shown.startswith("line 0000")
    assert "line 0019" in shown and "line 0020 " not in shown
    assert "line 0999" in shown
    assert f"[Full output ({len(BIG)} chars) saved as ref=call_1;" in shown
    assert len(shown) < 3000
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    saved = directory / "call_1.txt"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert saved.read_text() == BIG


def test_offloading_is_idempotent(tmp_path: Path) -> None:
    history = _history()
    first = offload_large_outputs(history, 10_000, tmp_path)
    mtime = (tmp_path / "call_1.txt").stat().st_mtime_ns
    second = offload_large_outputs(history, 10_000, tmp_path)
    assert _content(first) == _content(second)
    assert (tmp_path / "call_1.txt").stat().st_mtime_ns == mtime
    assert list_offloaded(tmp_path) == [("call_1", len(BIG))]


def test_input_is_not_mutated_and_small_outputs_stay(tmp_path: Path) -> None:
    history = _history("small")
    snapshot = copy.deepcopy(history)
    out = offload_large_outputs(history, 10_000, tmp_path)
    assert history == snapshot and out == history
    assert list_offloaded(tmp_path) == []


def test_zero_threshold_disables(tmp_path: Path) -> None:
    assert offload_large_outputs(_history(), 0, tmp_path) == _history()
    assert not any(tmp_path.iterdir())


def test_dict_output_is_saved_as_json(tmp_path: Path) -> None:
    out = offload_large_outputs(_history({"rows": ["r" * 100] * 200}), 5_000, tmp_path)
    assert "saved as ref=call_1" in _content(out)
    assert (tmp_path / "call_1.txt").read_text().startswith('{"rows":["rrr')


def test_read_pages_with_next_offset(tmp_path: Path) -> None:
    offload_large_outputs(_history(), 10_000, tmp_path)
    first = read_tool_output(tmp_path, "call_1", 0, 1000)
    assert first.startswith(BIG[:1000])
    assert "next offset=1000" in first
    last = read_tool_output(tmp_path, "call_1", len(BIG) - 10, 1000)
    assert last.startswith(BIG[-10:]) and "end of output" in last
    assert "past the end" in read_tool_output(tmp_path, "call_1", len(BIG) + 5)


def test_read_unknown_ref_says_so_and_lists_known(tmp_path: Path) -> None:
    offload_large_outputs(_history(), 10_000, tmp_path)
    message = read_tool_output(tmp_path, "nope")
    assert "unknown ref 'nope'" in message and "call_1" in message


def test_read_refuses_refs_that_escape(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    inner = tmp_path / "outputs"
    inner.mkdir()
    for ref in ("../secret", "/etc/passwd", "a/b", "..", ".hidden"):
        message = read_tool_output(inner, ref)
        assert message.startswith("Error: invalid ref"), ref
        assert "top secret" not in message


def test_unsafe_call_ids_get_safe_refs(tmp_path: Path) -> None:
    call_id = "../../etc/passwd"
    ref = ref_for(call_id)
    assert "/" not in ref and not ref.startswith(".")
    out = offload_large_outputs(_history(call_id=call_id), 10_000, tmp_path)
    assert f"ref={ref};" in _content(out)
    assert read_tool_output(tmp_path, ref, 0, 9).startswith("line 0000")


def test_reused_call_id_with_different_output_keeps_both(tmp_path: Path) -> None:
    offload_large_outputs(_history(), 10_000, tmp_path)
    other = BIG.replace("x", "y") + "\nmore"
    out = offload_large_outputs(_history(other), 10_000, tmp_path)
    refs = dict(list_offloaded(tmp_path))
    assert len(refs) == 2
    new_ref = next(ref for ref in refs if ref != "call_1")
    assert f"ref={new_ref};" in _content(out)
    assert (tmp_path / "call_1.txt").read_text() == BIG


def test_list_offloaded_on_missing_directory(tmp_path: Path) -> None:
    assert list_offloaded(tmp_path / "none") == []


@pytest.mark.parametrize("threshold", [500, 2_000, 10_000])
def test_a_preview_is_never_offloaded_again(tmp_path: Path, threshold: int) -> None:
    """Even under a threshold shorter than the preview itself (saved, then read back under other settings)."""
    once = offload_large_outputs(_history(), threshold, tmp_path)
    twice = offload_large_outputs(once, threshold // 2 or 1, tmp_path)
    assert _content(twice) == _content(once) and offloaded_refs(twice[2]) == {"call_1": "call_1"}
    assert list_offloaded(tmp_path) == [("call_1", len(BIG))]


@pytest.mark.parametrize(
    ("offload_chars", "size", "bounded"),
    [
        (40_000, 40_000, False),
        (40_000, 40_001, True),
        (40_000, 400_000, True),
        (0, STORED_OUTPUT_CEILING, False),  # offloading off: whole up to the ceiling
        (0, STORED_OUTPUT_CEILING + 1, True),
        (5_000_000, STORED_OUTPUT_CEILING + 1, True),
    ],
)
def test_the_transcript_keeps_a_huge_output_as_its_preview(
    tmp_path: Path, offload_chars: int, size: int, bounded: bool
) -> None:
    text = ("0123456789abcdef\n" * (size // 17 + 1))[:size]
    stored = bound_for_transcript(_history(text), offload_chars, tmp_path)
    shown = _content(stored)
    if not bounded:
        assert shown == text and list_offloaded(tmp_path) == []
        return
    assert len(shown) < 3_000 and f"[Full output ({size} chars) saved as ref=call_1;" in shown
    assert (tmp_path / "call_1.txt").read_text() == text
    assert stat.S_IMODE((tmp_path / "call_1.txt").stat().st_mode) == 0o600


def test_the_transcript_bounds_structured_outputs_too(tmp_path: Path) -> None:
    content = {"rows": [{"id": i, "name": "x" * 30} for i in range(5_000)]}
    stored = bound_for_transcript(_history(content), 40_000, tmp_path)
    shown = _content(stored)
    assert isinstance(shown, str) and len(shown) < 3_000 and "saved as ref=call_1" in shown
    assert json.loads((tmp_path / "call_1.txt").read_text()) == content


def test_an_output_that_cannot_be_saved_stays_whole_in_the_transcript(tmp_path: Path) -> None:
    """The sending path says it cannot write (the turn fails with that line); the transcript loses nothing."""
    blocked = tmp_path / "outputs"
    blocked.write_text("a file where a directory should be")
    assert _content(bound_for_transcript(_history(), 1_000, blocked / "session")) == BIG
    with pytest.raises(OSError):
        offload_large_outputs(_history(), 1_000, blocked / "session")


def test_the_last_output_is_read_whole_from_its_file_once_offloaded(tmp_path: Path) -> None:
    directory = tmp_path / "outputs"
    stored = bound_for_transcript(_history(), 10_000, directory)
    assert BIG not in _content(stored)
    last = last_tool_output(stored, directory)
    assert last is not None and last.tool_name == "run" and last.text == BIG and last.ref
    small = [*stored, calls(("grep", {}, "call_2")), returns(("grep", "one match", "call_2"))]
    assert last_tool_output(small, directory) == last_tool_output(small, directory)
    assert last_tool_output(small, directory).text == "one match"  # type: ignore[union-attr]
    assert last_tool_output([user("q"), reply("ok")], directory) is None
