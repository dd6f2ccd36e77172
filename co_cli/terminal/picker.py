"""The full-screen session picker (``/resume`` without an id, ``co chat --pick``).

Typing always filters, as in fzf (titles and message text, with the matching snippet); Up/Down (or Tab and
Shift-Tab, PgUp/PgDn) choose; Enter resumes; Ctrl-F forks; Ctrl-D moves to the trash (after asking); Ctrl-T
shows only sessions from this directory; Esc leaves. A ● marks sessions open in
another co, "(this session)" the one you are in, and ``⑂ <id> #n`` a fork: the session and message it came
from. A row too wide for the terminal ends in "…". Only the rows on screen are drawn, so 10,000 sessions draw
as fast as 10.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.processors import BeforeInput
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import get_cwidth

from co_cli.errors import CoError
from co_cli.store import SNIPPET_CLOSE, SNIPPET_OPEN
from co_cli.terminal.picker_model import Match, PickerModel
from co_cli.terminal.views import format_time
from co_cli.terminal_text import counted, printable

if TYPE_CHECKING:
    from co_cli.store import Store

Action = Literal["resume", "fork"]
HELP = "type to filter · ↑↓ choose · Enter resume · Ctrl-F fork · Ctrl-D trash · Ctrl-T this dir · Esc leave"
SHORT_HELP = "↑↓ · Enter resume · ^F fork · ^D trash · ^T this dir · Esc leave"
"""The key hints for a narrow terminal."""
STYLE = Style.from_dict(
    {
        "selected": "reverse",
        "dim": "#888888",
        "match": "bold #ffaf00",
        "open": "#ff5f5f bold",
        "footer": "#888888",
        "ask": "bold #ffaf00",
        "current": "bold #5fafff",
    }
)


@dataclass(frozen=True)
class PickChoice:
    action: Action
    session_id: str


class Picker:
    def __init__(self, store: Store, cwd: str, current: str | None = None) -> None:
        self.model = PickerModel(store, cwd)
        self.model.load()
        self.store = store
        self.current = current
        self.filter_text = ""
        self.matches: list[Match] = self.model.filter("")
        self.selected = 0
        self.top = 0
        self.asking: str | None = None  # the session id a trash question is about
        self.message = ""
        self._short_ids: dict[str, str] = {}
        self.searching = False
        self.filter_buffer = Buffer(on_text_changed=self._on_filter)
        self.app: Application[PickChoice | None] = self._build()

    # ----- state -------------------------------------------------------------------------------------
    def _short(self, session_id: str) -> str:
        """The session's id as co shows it: the fewest characters that name it alone (kept while open)."""
        if session_id not in self._short_ids:
            self._short_ids[session_id] = self.store.sessions.short_id(session_id)
        return self._short_ids[session_id]

    def _on_filter(self, buffer: Buffer) -> None:
        self.message = ""
        self.refilter(buffer.text)

    def refilter(self, text: str) -> None:
        self.filter_text = text
        self.matches = self.model.filter(text)
        self.selected = 0
        self.top = 0
        self.searching = not self.model.complete
        if self.searching:
            self.app.create_background_task(self._complete(text, self.model.this_directory_only))

    async def _complete(self, text: str, this_directory_only: bool) -> None:
        """Find every match (the keystroke searched the newest messages only); shown if still wanted."""
        await asyncio.sleep(0.05)  # typing on: only the last keystroke's search runs
        if text != self.filter_text or this_directory_only != self.model.this_directory_only:
            return
        matches = await asyncio.to_thread(self.model.complete_filter, text)
        if text != self.filter_text or this_directory_only != self.model.this_directory_only:
            return
        chosen = self.chosen()
        self.matches = matches
        self.searching = False
        ids = [m.row.id for m in matches]
        self.selected = ids.index(chosen.row.id) if chosen is not None and chosen.row.id in ids else 0
        self.app.invalidate()

    def move(self, delta: int) -> None:
        if self.matches:
            self.selected = max(0, min(len(self.matches) - 1, self.selected + delta))

    def chosen(self) -> Match | None:
        return self.matches[self.selected] if self.matches else None

    def _rows_on_screen(self) -> int:
        return max(3, self.app.output.get_size().rows - 4)

    # ----- drawing -----------------------------------------------------------------------------------
    def _header(self) -> StyleAndTextTuples:
        scope = "this directory" if self.model.this_directory_only else "all directories"
        total = len(self.model.rows)
        found = f"{len(self.matches)}+ (searching…)" if self.searching else str(len(self.matches))
        return [("bold", " Sessions "), ("class:dim", f"{found} of {total} · {scope}")]

    def _list(self) -> StyleAndTextTuples:
        height = self._rows_on_screen()
        if self.selected < self.top:
            self.top = self.selected
        lines: StyleAndTextTuples = []
        used = 0
        now = time.time()
        if self.filter_text.strip():
            drawn = self.matches[self.top : max(self.top, self.selected) + height]
            self.model.prefetch_snippets(self.filter_text, drawn)
        index = self.top
        while index < len(self.matches) and used < height:
            match = self.matches[index]
            snippet = self.model.snippet(self.filter_text, match) if self.filter_text.strip() else ""
            needed = 2 if snippet else 1
            if used + needed > height and index > self.selected:
                break
            lines.extend(self._row(match, snippet, index == self.selected, now))
            used += needed
            index += 1
        if self.selected >= index and self.selected < len(self.matches):
            # The chosen row is below the screen: scroll so that it is the last one drawn.
            self.top += self.selected - index + 1
            return self._list()
        if not self.matches:
            lines.append(("class:dim", "  no session matches\n"))
        return lines

    def _row(self, match: Match, snippet: str, selected: bool, now: float) -> StyleAndTextTuples:
        row = match.row
        style = "class:selected" if selected else ""
        mark = ("class:open", "● ") if row.id in self.model.open_elsewhere else ("", "  ")
        title = printable(row.title) or "untitled"
        info = f"  {format_time(row.updated_at, now)} · {counted(row.message_count, 'msg')}"
        info += f" · {printable(row.model)} · {printable(_short_dir(row.cwd))}"
        line: StyleAndTextTuples = [mark, (style + " class:dim", self._short(row.id) + " ")]
        if row.id == self.current:
            line.append((style + " class:current", "(this session) "))
        if row.parent_id:  # before the title: forks of one session share it
            line.append((style + " class:dim", f"⑂ {self._short(row.parent_id)} #{row.fork_seq} "))
        line += [(style, title[:80]), (style + " class:dim", info)]
        out = [*fit(line, self._columns()), ("", "\n")]
        if snippet:
            out += [*fit([("class:dim", "      "), *_snippet_fragments(snippet)], self._columns()), ("", "\n")]
        return out

    def _columns(self) -> int:
        return self.app.output.get_size().columns

    def _footer(self) -> StyleAndTextTuples:
        if self.asking is not None:
            return [("class:ask", f" Move {self._short(self.asking)} to the trash? y/n ")]
        if self.message:
            return [("class:ask", " " + self.message)]
        hints = f" {HELP}"
        if get_cwidth(hints) > self._columns():
            hints = f" {SHORT_HELP}"
        return fit([("class:footer", hints)], self._columns())

    def _build(self) -> Application[PickChoice | None]:
        kb = self._keys()
        self.filter_window = Window(
            BufferControl(self.filter_buffer, input_processors=[BeforeInput("filter: ", style="class:dim")]),
            height=1,
        )
        self.list_window = Window(FormattedTextControl(self._list))
        body = HSplit(
            [
                Window(FormattedTextControl(self._header), height=1),
                self.filter_window,
                self.list_window,
                Window(FormattedTextControl(self._footer), height=1),
            ]
        )
        return Application(
            layout=Layout(body, focused_element=self.filter_window),
            key_bindings=kb,
            style=STYLE,
            full_screen=True,
            mouse_support=False,
        )

    def _keys(self) -> KeyBindings:
        """Every key but the ones below types into the filter (a trash question takes the next key)."""
        asking = Condition(lambda: self.asking is not None)
        kb = KeyBindings()

        @kb.add("escape", eager=True)
        @kb.add("c-c")
        def _leave(event: KeyPressEvent) -> None:
            if self.asking is not None:
                self.asking = None
                return
            event.app.exit(result=None)

        moves = {"up": -1, "s-tab": -1, "down": 1, "tab": 1}
        for key, delta in moves.items():
            kb.add(key, filter=~asking)(lambda event, delta=delta: self.move(delta))
        kb.add("pageup", filter=~asking)(lambda event: self.move(-self._rows_on_screen()))
        kb.add("pagedown", filter=~asking)(lambda event: self.move(self._rows_on_screen()))
        kb.add("enter", filter=~asking)(lambda event: self._choose(event, "resume"))
        kb.add("c-f", filter=~asking)(lambda event: self._choose(event, "fork"))

        @kb.add("c-t", filter=~asking)
        def _toggle_directory(event: KeyPressEvent) -> None:
            self.model.this_directory_only = not self.model.this_directory_only
            self.refilter(self.filter_text)

        @kb.add("c-d", filter=~asking)
        def _ask_trash(event: KeyPressEvent) -> None:
            self.message = ""
            match = self.chosen()
            if match is None:
                return
            if match.row.id == self.current:
                self.message = "that is the current session: /delete moves it to the trash"
                return
            self.asking = match.row.id

        @kb.add("y", filter=asking)
        def _trash(event: KeyPressEvent) -> None:
            session_id, self.asking = self.asking, None
            assert session_id is not None
            try:
                self.store.trash.put(session_id)
            except CoError as exc:
                self.message = exc.message
                return
            self.model.remove(session_id)
            self.refilter(self.filter_text)
            self.message = f"moved {self._short(session_id)} to the trash (`co sessions restore` brings it back)"

        @kb.add("<any>", filter=asking)
        def _keep(event: KeyPressEvent) -> None:
            self.asking = None

        return kb

    def _choose(self, event: KeyPressEvent, action: Action) -> None:
        match = self.chosen()
        if match is not None:
            event.app.exit(result=PickChoice(action, match.row.id))


def fit(fragments: StyleAndTextTuples, width: int) -> StyleAndTextTuples:
    """The fragments cut to ``width`` terminal cells, ending in "…" where something was cut."""
    if sum(get_cwidth(text) for _, text, *_ in fragments) <= width:
        return fragments
    out: StyleAndTextTuples = []
    room = max(0, width - 1)
    for style, text, *_ in fragments:
        kept = ""
        for char in text:
            cells = get_cwidth(char)
            if cells > room:
                break
            kept += char
            room -= cells
        out.append((style, kept))
        if len(kept) < len(text):
            out.append((style, "…"))
            break
    return out


def _short_dir(path: str) -> str:
    import os

    home = os.path.expanduser("~")
    if home and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def _snippet_fragments(snippet: str) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    rest = printable(snippet.replace("\n", " "))[:200]
    while SNIPPET_OPEN in rest:
        before, _, after = rest.partition(SNIPPET_OPEN)
        found, _, rest = after.partition(SNIPPET_CLOSE)
        out.append(("class:dim", before))
        out.append(("class:match", found))
    out.append(("class:dim", rest))
    return out


async def pick_session(store: Store, *, cwd: str, current: str | None = None) -> PickChoice | None:
    """Show the picker; the chosen session and what to do with it, or None if the user left."""
    picker = Picker(store, cwd, current)
    return await picker.app.run_async()
