"""``@path`` and ``!command`` (``session/attachments.py``), in process: a named file goes with the prompt under
read_file's rules; a command's output goes with the next prompt; both are saved with it and come back on
resume; the session is titled by the user's own words."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage

from co_cli.message_view import user_text
from co_cli.session.attachments import MENTION
from co_cli.tools.files import path_completions, read_for_prompt
from co_cli.tools.paths import PathError, own_files
from tests.support.chat_app import ChatRun
from tests.support.turn_core import Core, core, streaming_model

__all__ = ["core"]

pytestmark = pytest.mark.allow_model_requests


class Seen:
    """A model that answers "ok" and keeps the last user message of each request."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, messages: list[ModelMessage]) -> str:
        self.prompts.append(user_text(messages[-1]) or "")
        return "ok"


def test_a_named_file_goes_with_the_prompt_and_is_saved_with_it(core: Core) -> None:
    (core.cwd / "notes.txt").write_text("the launch is on Friday\n")
    seen = Seen()
    chat = ChatRun(core, streaming_model(seen))
    printed = chat.send("summarise @notes.txt, please")
    assert printed.code == 0, printed.err
    assert seen.prompts[0].startswith("summarise @notes.txt, please\n\n[The file @notes.txt, as read_file returns it]")
    assert "     1\tthe launch is on Friday\n[end of file: 1 lines]" in seen.prompts[0]
    session = chat.conv.session
    assert session is not None and session.title == "summarise @notes.txt, please"
    saved = core.store.messages.transcript(session.id)[0]
    assert "the launch is on Friday" in saved.text


def test_a_file_that_may_not_be_sent_stops_the_prompt_with_one_line(core: Core, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("outside\n")
    (core.cwd / "link.txt").symlink_to(outside)
    (core.cwd / "data.bin").write_bytes(b"\0\1\2")
    seen = Seen()
    chat = ChatRun(core, streaming_model(seen))
    printed = chat.send(f"read @{outside}", "read @link.txt", "read @data.bin", "mail me@example.org or @nobody")
    errors = [line for line in printed.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 3 and printed.code == 1
    assert "outside the working directory" in errors[0] and "nothing was sent" in errors[0]
    assert "link.txt is outside the working directory" in errors[1]  # a symlink leads where it leads
    assert "data.bin is a binary file" in errors[2]
    assert "@nobody names no file in the working directory: sent as typed" in printed.err
    assert seen.prompts == ["mail me@example.org or @nobody"]
    assert "Traceback" not in printed.err


def test_cos_own_files_are_never_attached_or_offered(core: Core) -> None:
    own = own_files(chat_deps := ChatRun(core, streaming_model(Seen())).conv.deps)
    settings = core.cwd / ".co-cli" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}")
    with pytest.raises(PathError, match="co's own files"):
        read_for_prompt(core.cwd, own_files(chat_deps), ".co-cli/settings.json")
    assert path_completions(core.cwd, own, ".co-cli/") == []
    (core.cwd / "src").mkdir()
    (core.cwd / "src" / "main.py").write_text("print(1)\n")
    (core.cwd / "notes one.txt").write_text("x\n")
    assert path_completions(core.cwd, own, "s") == ["src/"]
    assert path_completions(core.cwd, own, "src/m") == ["src/main.py"]
    assert path_completions(core.cwd, own, "notes") == ["notes one.txt"]
    assert path_completions(core.cwd, own, "../") == []


def test_mentions_end_before_punctuation_and_keep_escaped_spaces() -> None:
    found = [m.group(1) for m in MENTION.finditer(r"see @a/b.txt, @notes\ one.txt and x@y.z")]
    assert found == ["a/b.txt,", r"notes\ one.txt"]


def test_a_commands_output_goes_with_the_next_prompt_and_survives_resume(core: Core) -> None:
    seen = Seen()
    chat = ChatRun(core, streaming_model(seen))
    output = asyncio.run(chat.conv.attachments.run_command("echo from-the-shell; pwd"))
    assert "from-the-shell" in output and os.fspath(core.cwd.resolve()) in output
    printed = chat.send("what did it print?")
    assert printed.code == 0, printed.err
    sent = seen.prompts[0]
    assert sent.startswith("[I ran this command myself: $ echo from-the-shell; pwd]\nexit code: 0\nstdout:\n")
    assert sent.endswith("\n\nwhat did it print?")
    session = chat.conv.session
    assert session is not None and session.title == "what did it print?"
    chat.send("and again?")
    assert "from-the-shell" not in seen.prompts[1]  # it went with one prompt

    resumed = ChatRun(core, streaming_model(seen))
    resumed.conv.load(core.store.sessions.get(session.id))
    resumed.send("still there?")
    assert any("from-the-shell" in str(m) for m in resumed.conv.working)


def test_a_commands_output_is_dropped_with_the_conversation_it_was_for(core: Core) -> None:
    seen = Seen()
    chat = ChatRun(core, streaming_model(seen))
    asyncio.run(chat.conv.attachments.run_command("echo left-behind"))
    chat.send("/new", "hello")
    assert seen.prompts == ["hello"]
