"""Streaming Markdown: finished blocks are printed once; only the growing block is re-rendered."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from co_cli.terminal.render import (
    MarkdownStream,
    PlainView,
    result_preview,
    short_args,
    stable_split,
    summarize_result,
)


def test_stable_split_at_blank_lines_outside_fences() -> None:
    text = "para one\n\npara two\n\n```py\ncode\n\nmore code\n"
    split = stable_split(text)
    assert text[:split] == "para one\n\npara two\n\n"
    closed = text + "```\nafter"
    assert closed[: stable_split(closed)].endswith("```\n")


def test_stable_split_ignores_the_growing_line() -> None:
    assert stable_split("no newline yet") == 0
    assert stable_split("line\n") == 0
    assert stable_split("line\n\nnext") == len("line\n\n")


def test_markdown_stream_prints_each_block_once() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False)
    stream = MarkdownStream(console)
    answer = "# Title\n\nFirst paragraph with **bold**.\n\n- item one\n- item two\n\nLast words."
    for i in range(0, len(answer), 3):
        stream.feed(answer[i : i + 3])
    assert stream.finish() == answer
    text = out.getvalue()
    assert text.count("First paragraph with bold.") == 1
    assert text.count("item two") == 1
    assert "Last words." in text and "**" not in text


def test_plain_view_writes_raw_text_and_tools_to_stderr() -> None:
    out, err = io.StringIO(), io.StringIO()
    view = PlainView(out, err)
    view.text("hello ")
    view.tool_call("read_file", {"path": "a.txt"})
    view.tool_result("read_file", "line1\nline2")
    view.text("world")
    view.end()
    assert out.getvalue() == "hello \nworld\n"
    assert "read_file(path=a.txt)" in err.getvalue()
    assert "line1" in err.getvalue()


def test_short_args_and_result_summary() -> None:
    assert short_args('{"command": "ls -la"}') == "command=ls -la"
    assert short_args({"command": "echo a\nb"}) == "command='echo a\\nb'"
    assert short_args({"x": "y" * 500}).endswith("…")
    assert summarize_result("first line\nsecond") == "17 chars: first line"
    assert summarize_result({"a": 1}).startswith("8 chars")
    assert "KB" in summarize_result("x" * 5000)


def test_control_sequences_from_the_model_never_reach_the_terminal() -> None:
    from co_cli.terminal_text import printable

    assert printable("ok\x1b]52;c;ZXZpbA==\x07 done\n\tx") == "ok]52;c;ZXZpbA== done\n\tx"
    out = io.StringIO()
    stream = MarkdownStream(Console(file=out, width=80, force_terminal=True))
    stream.feed("title \x1b]0;PWNED\x07 and \x1b[2J clear\n\n")
    stream.finish()
    assert "\x1b]0;" not in out.getvalue() and "\x1b[2J" not in out.getvalue()


OSC52 = "\x1b]52;c;ZXZpbA==\x07"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_printable_drops_c0_c1_and_escape_sequence_starters() -> None:
    from co_cli.terminal_text import printable

    for control in ("\x1b", "\x9b", "\x9d", "\x90", "\x9c", "\x07", "\x08", "\r", "\x7f", "\x85"):
        assert printable(f"a{control}b") == "ab"
    assert printable("tab\tand\nnewline stay") == "tab\tand\nnewline stay"


def _every_character(*categories: str) -> list[str]:
    import sys
    import unicodedata

    return [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in categories]


def test_printable_drops_every_control_and_format_character_so_none_can_reorder_a_line() -> None:
    from co_cli.terminal_text import printable, without_control_sequences

    joiners = ("\u200c", "\u200d")  # kept: they only join neighbouring letters (Persian words, emoji sequences)
    for char in _every_character("Cc", "Cf"):
        if char in ("\t", "\n", *joiners):
            continue
        assert printable(f"a{char}b") == "ab", f"U+{ord(char):04X}"
        if char not in "\x1b\x90\x98\x9b\x9d\x9e\x9f":  # these start a sequence, removed whole with what follows
            assert without_control_sequences(f"a{char}b") == "ab", f"U+{ord(char):04X}"
    for char in _every_character("Zl", "Zp"):  # a line or paragraph separator is a line break
        assert printable(f"a{char}b") == "a\nb" and without_control_sequences(f"a{char}b") == "a b"
    assert (
        printable("\u05e9\u05dc\u05d5\u05dd \u202eevil.exe\u202c \u2067txt\u2069")
        == "\u05e9\u05dc\u05d5\u05dd evil.exe txt"
    )
    assert printable("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \U0001f468\u200d\U0001f469") == (
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \U0001f468\u200d\U0001f469"
    )


def test_one_line_shows_every_invisible_character_as_its_escape() -> None:
    from co_cli.terminal_text import one_line

    for char in _every_character("Cc", "Cf", "Zl", "Zp"):
        shown = one_line(f"a{char}b")
        assert shown.isprintable() and shown == f"a{char.encode('unicode_escape').decode()}b", f"U+{ord(char):04X}"
    assert one_line("run npx -y server") == "run npx -y server"
    assert one_line("a\u00a0b\u3000c") == "a\\xa0b\\u3000c"  # spaces other than ' ' are shown too
    assert one_line("caf\u00e9 \u05e9\u05dc\u05d5\u05dd \U0001f600") == "caf\u00e9 \u05e9\u05dc\u05d5\u05dd \U0001f600"


@pytest.mark.parametrize(
    "control", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]
)
def test_printable_drops_bidi_overrides_and_isolates(control: str) -> None:
    """They would show the text after them in another order than it is stored ("gnp.exe" read as "exe.png")."""
    from co_cli.terminal_text import printable, printable_line, without_control_sequences

    assert printable(f"invoice{control}gnp.exe") == "invoicegnp.exe"
    assert without_control_sequences(f"עברית{control}abc") == "עבריתabc"  # right-to-left text itself stays
    assert printable_line(f"  one{control}\n2. [x] two\u2028three\r\nfour  ") == "one 2. [x] two three four"


def test_plain_view_stderr_lines_carry_no_controls() -> None:
    out, err = io.StringIO(), io.StringIO()
    view = PlainView(out, err)
    view.tool_call(f"read_file{OSC52}", {"path": f"a{OSC52}.txt", "note": "\x9b2J"})
    view.tool_result("read_file", f"{OSC52}first line\nsecond")
    view.notice(f"offloaded \x1b[2J{OSC52}")
    view.end()
    text = err.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "first line" in text and "read_file" in text


def test_plain_view_answer_exact_for_a_pipe_sanitised_for_a_terminal() -> None:
    answer = f"red \x1b[31mtext\x1b[0m {OSC52} done"
    piped = io.StringIO()
    view = PlainView(piped, io.StringIO())
    view.text(answer)
    view.end()
    assert piped.getvalue() == answer + "\n"
    terminal = _Terminal()
    view = PlainView(terminal, io.StringIO())
    view.text(answer)
    view.end()
    assert "\x1b" not in terminal.getvalue() and "\x07" not in terminal.getvalue()
    assert "text" in terminal.getvalue() and "done" in terminal.getvalue()


def test_a_result_preview_has_its_size_first_lines_and_what_is_left_out() -> None:
    size, lines, left_out = result_preview("exit code: 0\nstdout:\n\n1\n2\t3\n4\n5\n\x1b[31m6")
    assert size == "8 lines, 38 chars"
    assert lines == ["exit code: 0", "stdout:", "1", "2   3", "4"] and left_out == 2
    assert result_preview("") == ("0 lines, 0 chars", [], 0)
