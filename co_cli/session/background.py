"""Work of the live session that never sits on the prompt's critical path: the session's title and memory
extraction. Started after a turn, awaited (for a while) at exit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic_ai.models import Model

from co_cli.deps import SessionState
from co_cli.memory.extract import ExtractionWorker, worth_extracting
from co_cli.session.engine import Engine
from co_cli.session.recorder import Extraction, Recorder
from co_cli.store import SessionInfo, Store


class Background:
    def __init__(self, store: Store, state: SessionState, engine: Engine, recorder: Recorder) -> None:
        self.store = store
        self.state = state
        self.engine = engine
        self.recorder = recorder
        self.memory_worker: ExtractionWorker | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # ----- memory extraction ------------------------------------------------------------------------------
    def attach_extraction(self, on_change: Callable[[], None] | None = None) -> ExtractionWorker | None:
        """Extract facts after each answered turn (with the summarisation model), when memory and extraction
        are on. Left off when the summariser is the small model co ships: its readings of a message are mostly
        wrong. A GGUF the user chose extracts, paused while a turn runs (``pause_extraction``). ``on_change``
        is called when proposals arrive (the toolbar redraws)."""
        deps = self.engine.deps
        if not deps.memory_on or deps.settings.memory_extract == "off" or self.engine.summarizer_is_bundled:
            return None
        self.memory_worker = ExtractionWorker(
            self.store.memories,
            self.store.queue,
            lambda: self.engine.memory_model,
            deps.settings.memory_extract,
            deps.project,
            on_change=on_change,
            readings=self.store.readings,
        )
        return self.memory_worker

    def extraction(self, prompt: str) -> Extraction | None:
        """The queue item of an answered turn (saved with it), or None when it holds nothing worth a look."""
        worker = self.memory_worker
        if worker is None or worker.mode == "off" or not worth_extracting(prompt):
            return None
        return Extraction(prompt, worker.project)

    def cost_notice(self, prompt: str) -> str | None:
        """Once per user, when the turn of ``prompt`` is the first to be sent to a model for extraction: what
        that costs and how to turn it off (the model co ships never extracts: ``attach_extraction``)."""
        if self.extraction(prompt) is None:
            return None
        from co_cli.memory.cost_notice import extraction_cost_notice

        return extraction_cost_notice(self.engine.deps.paths.data_dir, self.engine.summary_model_name)

    async def pause_extraction(self) -> None:
        """Before a turn: stop an extraction running on the embedded engine, which answers one request at a time
        (the turn would wait for it). Its message stays queued; the turn's end starts the worker again."""
        worker = self.memory_worker
        if worker is not None and worker.busy and self.engine.summarizer_is_embedded:
            await worker.stop()

    def start_extraction(self) -> None:
        """Work through the extraction queue (including what an earlier co left) in the background."""
        if self.memory_worker is not None:
            self.memory_worker.start()

    # ----- titles -----------------------------------------------------------------------------------------
    def start_title(self, prompt: str, answer: str) -> None:
        """Title the session from its first exchange in the background (``auto_title``). Skipped with the
        embedded local model as summariser: the next answer would wait for it."""
        session = self.state.info
        if not self.engine.deps.settings.auto_title or session is None or self.engine.summarizer_is_embedded:
            return
        model = self.engine.summarizer or self.engine.resolved.model
        task = asyncio.ensure_future(self._title(session, model, prompt, answer))

        def done(finished: asyncio.Task[str | None]) -> None:
            self._tasks.discard(finished)
            title = None if finished.cancelled() or finished.exception() else finished.result()
            if title and self.state.info is session:
                session.title = title

        task.add_done_callback(done)
        self._tasks.add(task)

    async def _title(self, session: SessionInfo, model: Model, prompt: str, answer: str) -> str | None:
        """The title saved for ``session``, or None (a failure of any kind keeps the first-prompt title)."""
        from co_cli.session.titles import ask_title

        title, spent = await ask_title(model, prompt, answer)
        try:
            saved = self.recorder.title(session.id, session.title, title, spent)
        except Exception:  # the store closed or failed meanwhile: the first-prompt title stays
            return None
        return title if saved else None

    async def finish(self, timeout: float = 15.0) -> None:
        """Let background work (titles) finish, at most ``timeout`` seconds; what is left is cancelled."""
        pending = set(self._tasks)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late)
