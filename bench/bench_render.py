"""Streaming render benchmark: cost per frame of co's MarkdownStream against re-rendering the whole answer.

A frame is what the live area redraws (about 12 per second). co prints finished Markdown blocks once and
re-renders only the block still growing, so a frame costs the same at token 50 and at token 5,000; a naive
Live(Markdown(whole_answer)) frame grows with the answer.

Usage: python bench/bench_render.py
"""

from __future__ import annotations

import io
import statistics
import time

from rich.console import Console
from rich.markdown import Markdown

from co_cli.terminal.render import MarkdownStream

BLOCK = (
    "## Step {i}\n\nThis paragraph explains step {i} with some **bold** text, `inline code` and a "
    "[link](https://example.com). It goes on for a while to look like a real answer.\n\n"
    "- first point about step {i}\n- second point, a little longer than the first one\n\n"
    "```python\ndef step_{i}(x: int) -> int:\n    return x * {i}\n```\n\n"
)


def answer(blocks: int) -> str:
    return "".join(BLOCK.format(i=i) for i in range(blocks))


def tokens(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def frame_cost(console: Console, renderable: object) -> float:
    start = time.perf_counter()
    console.render_lines(renderable, console.options)  # type: ignore[arg-type]
    return time.perf_counter() - start


def measure(blocks: int, frame_every: int = 4) -> tuple[float, float, float, float, float]:
    text = answer(blocks)
    sink = Console(file=io.StringIO(), width=100, force_terminal=True, color_system="truecolor")
    stream = MarkdownStream(sink, refresh_per_second=1)  # frames are timed here, not by the refresh thread
    ours: list[float] = []
    naive: list[float] = []
    feed_total = 0.0
    shown = ""
    for n, tok in enumerate(tokens(text)):
        start = time.perf_counter()
        stream.feed(tok)
        feed_total += time.perf_counter() - start
        shown += tok
        if n % frame_every == 0:
            tail = stream.buffer[stream.done :]
            ours.append(frame_cost(sink, Markdown(tail)))
            naive.append(frame_cost(sink, Markdown(shown)))
    stream.finish()
    return (
        len(text),
        statistics.median(ours) * 1e3,
        max(ours) * 1e3,
        statistics.median(naive) * 1e3,
        max(naive) * 1e3,
    ) + (feed_total / len(tokens(text)) * 1e3,)  # type: ignore[return-value]


def main() -> None:
    print(f"{'answer chars':>12} | {'co frame ms (med/max)':>22} | {'naive frame ms (med/max)':>25} | feed ms/token")
    for blocks in (5, 20, 80):
        chars, o_med, o_max, n_med, n_max, feed = measure(blocks)
        print(f"{chars:>12,} | {o_med:>10.2f} / {o_max:>8.2f} | {n_med:>12.2f} / {n_max:>9.2f} | {feed:.3f}")


if __name__ == "__main__":
    main()
