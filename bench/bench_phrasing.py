"""Reading the user's words: how well a method takes co's decisions from a message (is it a standing rule, does
it state a change, the next step, a fact about someone else, a passing state, only a question, a secret),
measured on the labelled corpus in bench/phrasing/ (see its README for the labels and the split).

    python bench/bench_phrasing.py                      # the fallback (word lists and regexes), held-out half
    python bench/bench_phrasing.py --misses             # ... and each miss, with its id and text
    python bench/bench_phrasing.py --split tune --lang en
    python bench/bench_phrasing.py --method model -m local:/path/model.gguf --answers /tmp/answers.json
    python bench/bench_phrasing.py --method summariser -m local:/path/model.gguf --answers /tmp/summaries.json
    python bench/bench_phrasing.py --method step -m local:/path/model.gguf --answers /tmp/steps.json

Reported figures use the held-out half (the default); anything tuned looks at ``--split tune`` only.

A method is a function from the parsed arguments and the messages to be read to one ``Reader`` per decision
(``METHODS``). A method that asks a model adds its own arguments (e.g. ``-m MODEL``) in ``parse_args``, asks the
model once per message for a typed answer (one field per decision) before returning, and returns readers that
look each message's answer up; a decision it has no answer for gets a reader without ``read``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CORPUS = Path(__file__).resolve().parent / "phrasing" / "corpus.jsonl"
SPLITS = ("tune", "held")
ABOUT = ("user", "other", "none")
FLAGS = ("rule", "next_step", "passing", "question_only", "secret")
FIELDS = frozenset({"id", "lang", "text", "change", "about", "person", "split", *FLAGS})
PEOPLE_ASKED = "people_asked"
"""Marks a kept answer read with the question whether whom a fact is about is a person (``memory.people``): an
answer kept before it is asked that question (and the rule question again) when the run reads it."""


def split_of(corpus_id: str) -> str:
    """The half a corpus line belongs to, fixed by its id: "tune" when the sha256 of the id is even."""
    return "tune" if int(hashlib.sha256(corpus_id.encode("utf-8")).hexdigest(), 16) % 2 == 0 else "held"


@dataclass(frozen=True)
class Labelled:
    """One message of the corpus with its labels."""

    id: str
    lang: str
    text: str
    rule: bool
    change: tuple[str, str] | None
    """(old, new) when the message states that an earlier fact changed."""
    next_step: bool
    about: str
    person: str
    passing: bool
    question_only: bool
    secret: bool
    split: str


class CorpusError(ValueError):
    """A corpus line that does not follow bench/phrasing/README.md."""


def _check_header(line_no: int, raw: Any, seen: set[str]) -> str:
    """The line's id, after checking the fields every line must have right: a unique id and the split its id
    gives it."""
    if not isinstance(raw, dict):
        raise CorpusError(f"line {line_no}: not a JSON object")
    corpus_id, split = raw.get("id"), raw.get("split")
    if not isinstance(corpus_id, str) or not corpus_id:
        raise CorpusError(f"line {line_no}: no id")
    if corpus_id in seen:
        raise CorpusError(f"line {line_no}: id {corpus_id} repeated")
    seen.add(corpus_id)
    if split != split_of(corpus_id):
        raise CorpusError(f"{corpus_id}: split is {split!r}, the rule gives {split_of(corpus_id)!r}")
    return corpus_id


def _labelled(corpus_id: str, raw: dict[str, Any]) -> Labelled:
    def fail(why: str) -> CorpusError:
        return CorpusError(f"{corpus_id}: {why}")

    if set(raw) != FIELDS:
        raise fail(f"fields {sorted(set(raw) ^ FIELDS)} missing or unknown")
    lang, text = raw["lang"], raw["text"]
    if not isinstance(lang, str) or not corpus_id.startswith(f"{lang}-") or not corpus_id[len(lang) + 1 :].isdigit():
        raise fail("the id is not <lang>-<number>")
    if not isinstance(text, str) or not text.strip():
        raise fail("empty text")
    for flag in FLAGS:
        if not isinstance(raw[flag], bool):
            raise fail(f"{flag} is not true or false")
    change = raw["change"]
    if change is not None and not (
        isinstance(change, dict) and set(change) == {"old", "new"} and all(isinstance(v, str) for v in change.values())
    ):
        raise fail("change is neither null nor {old, new}")
    if change is not None and not (change["old"] or change["new"]):
        raise fail("change has neither an old nor a new value")
    about, person = raw["about"], raw["person"]
    if about not in ABOUT:
        raise fail(f"about is {about!r}")
    if not isinstance(person, str) or bool(person.strip()) != (about == "other"):
        raise fail("person must be given exactly when about is other")
    if raw["question_only"] and (raw["rule"] or change or raw["next_step"] or raw["passing"] or raw["secret"]):
        raise fail("a message that only asks states nothing else")
    return Labelled(
        id=corpus_id,
        lang=lang,
        text=text,
        rule=raw["rule"],
        change=None if change is None else (change["old"], change["new"]),
        next_step=raw["next_step"],
        about=about,
        person=person,
        passing=raw["passing"],
        question_only=raw["question_only"],
        secret=raw["secret"],
        split=raw["split"],
    )


def load_corpus(split: str, path: Path = CORPUS) -> list[Labelled]:
    """The messages of one half of the corpus, in file order. Every line's id and split are checked (unique
    ids, the split the rule gives); only the chosen half's lines are read further."""
    if split not in SPLITS:
        raise ValueError(f"split is one of {SPLITS}, not {split!r}")
    seen: set[str] = set()
    rows: list[Labelled] = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        raw = json.loads(line)
        corpus_id = _check_header(line_no, raw, seen)
        if raw["split"] == split:
            rows.append(_labelled(corpus_id, raw))
    return rows


# ----- the decisions and the methods that take them -----------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    name: str
    truth: Callable[[Labelled], bool]
    """The label, as true or false (for ``about``: whether the fact is about someone other than the user)."""


DECISIONS: tuple[Decision, ...] = (
    Decision("rule", lambda row: row.rule),
    Decision("change", lambda row: row.change is not None),
    Decision("next_step", lambda row: row.next_step),
    Decision("about=other", lambda row: row.about == "other"),
    Decision("passing", lambda row: row.passing),
    Decision("question_only", lambda row: row.question_only),
    Decision("secret", lambda row: row.secret),
)


@dataclass(frozen=True)
class Reader:
    """How a method takes one decision from a message."""

    decision: str
    name: str
    """What reads it (shown in the table)."""
    read: Callable[[str], bool] | None = None
    """None: the method has nothing that takes this decision."""


def fallback(args: argparse.Namespace, texts: Sequence[str]) -> list[Reader]:
    """co's word lists and regexes, each called on the message (or its sentences) as co calls it."""
    del args, texts  # nothing to fetch ahead
    from co_cli.context.pins import sentences
    from co_cli.cues import asks, cue_sentences, is_standing, names_next_step, passing, states_change
    from co_cli.secrets import find_secret

    def any_sentence(cue: Callable[[str], bool]) -> Callable[[str], bool]:
        return lambda text: any(cue(s) for s in sentences(text))

    return [
        Reader("rule", "cues.is_standing, any sentence", any_sentence(is_standing)),
        Reader("change", "cues.states_change, any sentence", any_sentence(states_change)),
        Reader("next_step", "cues.names_next_step, any sentence", any_sentence(names_next_step)),
        Reader("about=other", "no fallback"),
        Reader("passing", "cues.passing, any sentence", lambda text: any(passing(s) for s in cue_sentences(text))),
        Reader("question_only", "cues.asks, every sentence", lambda text: all(asks(s) for s in cue_sentences(text))),
        Reader("secret", "secrets.find_secret", lambda text: find_secret(text) is not None),
    ]


def model(args: argparse.Namespace, texts: Sequence[str]) -> list[Reader]:
    """co's typed reading of a message by the model ``-m``, as memory extraction asks it (``memory.extract.
    read_message``, with no memories kept yet: one request per message, and one more for each part read as a rule):
    a rule is a fact of kind "rule_for_assistant" that is not a question (``Fact.is_rule``) and holds for every
    later answer (``context.standing``), a change one of kind "change" that is not a question (``Fact.is_change``),
    the next step one of kind "next_step", a passing state one of kind "passing_state", a fact about another
    person one ``extract.whose`` finds is another person's, and a message that only asks is one with no fact that
    tells and no rule (nothing, or only questions and requests, by the model's form or a question mark:
    ``Fact.asks``). A secret is co's filter, not the model's reading. Answers are kept in ``--answers`` (a JSON
    file by message), so a run that stopped goes on where it was."""
    import asyncio
    import tempfile

    from co_cli.config import load_settings
    from co_cli.memory.extract import Reading, confirmed, read_message, whose
    from co_cli.models import resolve_model
    from co_cli.models.structured_answer import ProseAnswer
    from co_cli.secrets import find_secret
    from co_cli.store import Store

    answers_path = Path(args.answers) if args.answers else None
    answers: dict[str, Any] = json.loads(answers_path.read_text()) if answers_path and answers_path.exists() else {}
    chosen = resolve_model(load_settings(model=args.model).settings, "command line").model

    async def read_all(store: Store) -> None:
        for index, text in enumerate(texts):
            kept = answers.get(text)
            if kept is not None and not kept.get(PEOPLE_ASKED):  # read before whom a fact is about was asked
                reading = await confirmed(chosen, Reading.model_validate(kept), text)
                answers[text] = {**reading.model_dump(), PEOPLE_ASKED: True}
                if answers_path:
                    answers_path.write_text(json.dumps(answers, ensure_ascii=False, indent=1))
            if text in answers:
                continue
            try:
                reading, _ = await read_message(chosen, store.memories, text, "/bench")
            except ProseAnswer:
                reading, _ = await read_message(chosen, store.memories, text, "/bench", prompted=True)
            except Exception as exc:  # an answer that cannot be read counts as no reading
                print(f"  {index + 1}/{len(texts)}: no reading ({type(exc).__name__})", file=sys.stderr)
                answers[text] = None
                continue
            answers[text] = {**reading.model_dump(), PEOPLE_ASKED: True}
            print(f"  {index + 1}/{len(texts)} read", file=sys.stderr, flush=True)
            if answers_path:
                answers_path.write_text(json.dumps(answers, ensure_ascii=False, indent=1))

    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "bench.db") as store:
        asyncio.run(read_all(store))

    def facts(text: str) -> list[Any]:
        answer = answers.get(text)
        return Reading.model_validate(answer).facts if answer else []

    unread = sum(1 for t in texts if answers.get(t) is None)
    name = f"{args.model} ({unread} unread)" if unread else args.model

    def only_asks(text: str) -> bool:
        return answers.get(text) is not None and all(f.asks and not f.is_rule for f in facts(text))

    return [
        Reader("rule", f"{name}: a rule (not a question)", lambda t: any(f.is_rule for f in facts(t))),
        Reader("change", f"{name}: a change (not a question)", lambda t: any(f.is_change for f in facts(t))),
        Reader("next_step", f"{name}: the next step", lambda t: any(f.kind == "next_step" for f in facts(t))),
        Reader("about=other", f"{name}: another person", lambda t: any(whose(f, t) == "other" for f in facts(t))),
        Reader("passing", f"{name}: a passing state", lambda t: any(f.kind == "passing_state" for f in facts(t))),
        Reader("question_only", f"{name}: only asks (form or ?), no rule", only_asks),
        Reader("secret", "secrets.find_secret", lambda text: find_secret(text) is not None),
    ]


SPAN = 4
"""Messages per stretch the summariser is shown (``--method summariser``)."""
REPLY = "OK."
"""The assistant's turn between two of the user's messages in those stretches."""


def stretches(texts: Sequence[str], size: int = SPAN) -> list[list[str]]:
    """The messages in consecutive groups of ``size``, in corpus order (one language at a time, mostly)."""
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


RULE_QUESTIONS = "rule questions"
"""Where ``--answers`` keeps the answers to the rule question, by rule (no stretch's key: those hold its
messages)."""


def summariser(args: argparse.Namespace, texts: Sequence[str]) -> list[Reader]:
    """co's compaction reading by the model ``-m``: the messages in stretches of ``SPAN`` user turns (each answered
    "OK."), each stretch summarised as compaction asks it (``context.summarize.summarize_messages``: one typed
    answer with the standing instructions, the changes and the next step quoted from the user), and the quotes
    verified as compaction verifies them (``context.pins``). A message is a rule when a verified standing
    instruction lies in it and not also a change or the next step (``user_quotes.read_answer``) and, asked about
    alone as compaction asks it before pinning (``context.standing.confirmed_rules``), it reads as a rule (the
    reading before that question is reported too); a change when a
    change's quote is found in it (before compaction's further check that the earlier value occurs in the stretch,
    which one message alone rarely has), the next step when the stretch's one next step lies in it (a stretch
    with two next-step messages can have only one found). Answers are kept in ``--answers`` by stretch."""
    import asyncio

    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    from co_cli.config import load_settings
    from co_cli.context.pins import find_quote, normalise
    from co_cli.context.standing import confirmed_rules
    from co_cli.context.summarize import SummaryAnswer, summarize_messages
    from co_cli.context.user_quotes import read_answer
    from co_cli.models import resolve_model

    answers_path = Path(args.answers) if args.answers else None
    answers: dict[str, Any] = json.loads(answers_path.read_text()) if answers_path and answers_path.exists() else {}
    groups = stretches(texts)

    async def read_all() -> None:
        chosen = None
        for index, group in enumerate(groups):
            key = "\n".join(group)
            if key in answers:
                continue
            chosen = chosen or resolve_model(load_settings(model=args.model).settings, "command line").model
            messages = [
                message
                for text in group
                for message in (ModelRequest(parts=[UserPromptPart(text)]), ModelResponse(parts=[TextPart(REPLY)]))
            ]
            try:
                summarised = await summarize_messages(messages, chosen, max_input_tokens=3000)
                answers[key] = summarised.answer.model_dump() if summarised.typed else None
            except Exception as exc:  # an answer that cannot be read counts as no reading
                print(f"  {index + 1}/{len(groups)}: no reading ({type(exc).__name__})", file=sys.stderr)
                answers[key] = None
            print(f"  {index + 1}/{len(groups)} summarised", file=sys.stderr, flush=True)
            if answers_path:
                answers_path.write_text(json.dumps(answers, ensure_ascii=False, indent=1))

    asyncio.run(read_all())
    readings = {
        key: read_answer(SummaryAnswer.model_validate(raw), group, [*group, REPLY])
        for group in groups
        if (raw := answers.get(key := "\n".join(group))) is not None
    }
    asked: dict[str, bool] = answers.setdefault(RULE_QUESTIONS, {})

    async def ask_rules() -> None:
        chosen = None
        for rule in dict.fromkeys(rule for reading in readings.values() for rule in reading.rules):
            if rule not in asked:
                chosen = chosen or resolve_model(load_settings(model=args.model).settings, "command line").model
                asked[rule] = bool((await confirmed_rules(chosen, [rule]))[0])
                if answers_path:
                    answers_path.write_text(json.dumps(answers, ensure_ascii=False, indent=1))

    asyncio.run(ask_rules())
    found: dict[str, set[str]] = {"rule": set(), "unasked_rule": set(), "change": set(), "next_step": set()}
    for group in groups:
        raw = answers.get("\n".join(group))
        if raw is None:
            continue
        answer = SummaryAnswer.model_validate(raw)
        reading = readings["\n".join(group)]

        def holding(quote: str | None, group: Sequence[str] = group) -> list[str]:
            return [text for text in group if quote and normalise(quote) in normalise(text)]

        found["unasked_rule"].update(text for rule in reading.rules for text in holding(rule))
        found["rule"].update(text for rule in reading.rules if asked.get(rule) for text in holding(rule))
        found["change"].update(text for c in answer.changes for text in holding(find_quote(c.quote, group)))
        found["next_step"].update(holding(reading.next_step))
    unread = sum(1 for group in groups if answers.get("\n".join(group)) is None)
    name = f"{args.model} summariser" + (f" ({unread} of {len(groups)} stretches unread)" if unread else "")
    return [
        Reader("rule", f"{name}: standing instruction, not asked about alone", lambda t: t in found["unasked_rule"]),
        Reader("rule", f"{name}: standing instruction, read as a rule when asked alone", lambda t: t in found["rule"]),
        Reader("change", f"{name}: change", lambda t: t in found["change"]),
        Reader("next_step", f"{name}: next step", lambda t: t in found["next_step"]),
    ]


def step_question(args: argparse.Namespace, texts: Sequence[str]) -> list[Reader]:
    """The next-step question alone (``context.plans.sort_step``), asked of every message by the model ``-m``: the
    next step when it answers "later". In co it is asked only of what the reading called the next step; asked of
    every message it is measured on every kind of sentence. Answers are kept in ``--answers`` by message."""
    import asyncio

    from co_cli.config import load_settings
    from co_cli.context.plans import sort_step
    from co_cli.models import resolve_model

    answers_path = Path(args.answers) if args.answers else None
    answers: dict[str, Any] = json.loads(answers_path.read_text()) if answers_path and answers_path.exists() else {}

    async def ask_all() -> None:
        chosen = None
        for text in texts:
            if text in answers:
                continue
            chosen = chosen or resolve_model(load_settings(model=args.model).settings, "command line").model
            try:
                answers[text] = await sort_step(chosen, text)
            except Exception as exc:  # an answer that cannot be read counts as no reading
                print(f"  no answer ({type(exc).__name__}): {text}", file=sys.stderr)
                answers[text] = None
            if answers_path:
                answers_path.write_text(json.dumps(answers, ensure_ascii=False, indent=1))

    asyncio.run(ask_all())
    return [Reader("next_step", f"{args.model}: the next-step question alone", lambda t: answers.get(t) == "later")]


METHODS: dict[str, Callable[[argparse.Namespace, Sequence[str]], list[Reader]]] = {
    "fallback": fallback,
    "model": model,
    "summariser": summariser,
    "step": step_question,
}


# ----- measuring ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Score:
    decision: str
    reader: str
    n: int
    positives: int
    tp: int = 0
    fp: int = 0
    fn: int = 0
    measured: bool = True
    false_positives: tuple[Labelled, ...] = ()
    false_negatives: tuple[Labelled, ...] = ()

    @property
    def accuracy(self) -> float | None:
        return (self.n - self.fp - self.fn) / self.n if self.measured and self.n else None

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.measured and self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / self.positives if self.measured and self.positives else None


def score(rows: Sequence[Labelled], readers: Sequence[Reader]) -> list[Score]:
    """One score per reader, in ``DECISIONS`` order (a method's several readers of one decision in its order)."""
    by_name = {decision.name: decision for decision in DECISIONS}
    unknown = [reader.decision for reader in readers if reader.decision not in by_name]
    if unknown:
        raise ValueError(f"unknown decisions {unknown}")
    order = {decision.name: i for i, decision in enumerate(DECISIONS)}
    scores: list[Score] = []
    for reader in sorted(readers, key=lambda r: order[r.decision]):
        truth = by_name[reader.decision].truth
        positives = sum(truth(row) for row in rows)
        if reader.read is None:
            scores.append(Score(reader.decision, reader.name, len(rows), positives, measured=False))
            continue
        fps: list[Labelled] = []
        fns: list[Labelled] = []
        tp = 0
        for row in rows:
            said, true = reader.read(row.text), truth(row)
            tp += said and true
            if said and not true:
                fps.append(row)
            elif true and not said:
                fns.append(row)
        scores.append(
            Score(reader.decision, reader.name, len(rows), positives, tp, len(fps), len(fns),
                  false_positives=tuple(fps), false_negatives=tuple(fns))
        )  # fmt: skip
    return scores


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


TABLE_HEADER = ("decision", "read by", "accuracy", "precision", "recall", "n (positives)")


def table(scores: Sequence[Score]) -> list[str]:
    """The scores as aligned text lines: a header, then one line per reader."""
    body = [
        (
            s.decision,
            s.reader,
            *((_figure(s.accuracy), _figure(s.precision), _figure(s.recall)) if s.measured else ("", "", "")),
            f"{s.n} ({s.positives})",
        )
        for s in scores
    ]
    widths = [max(len(line[i]) for line in [TABLE_HEADER, *body]) for i in range(len(TABLE_HEADER))]

    def fmt(line: Sequence[str]) -> str:
        left = [line[i].ljust(widths[i]) for i in range(2)]
        right = [line[i].rjust(widths[i]) for i in range(2, len(line))]
        return "  ".join(left + right).rstrip()

    return [fmt(TABLE_HEADER), *(fmt(line) for line in body)]


def misses(scores: Sequence[Score]) -> list[str]:
    out: list[str] = []
    for s in scores:
        if not s.measured or not (s.false_positives or s.false_negatives):
            continue
        missed, wrong = len(s.false_negatives), len(s.false_positives)
        out.append(f"\n{s.decision} ({s.reader}): {missed} missed, {wrong} wrongly said")
        out += [f"  missed  {row.id}  {row.text}" for row in s.false_negatives]
        out += [f"  wrongly {row.id}  {row.text}" for row in s.false_positives]
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--method", choices=sorted(METHODS), default="fallback")
    parser.add_argument("--split", choices=SPLITS, default="held", help="held: for reports (default); tune: to tune")
    parser.add_argument("--lang", help="only the messages in this language (en, de, es, fr, ja, ru)")
    parser.add_argument("--misses", action="store_true", help="list each miss with its id and text")
    parser.add_argument("--every", type=int, default=1, help="only every N-th message of the half (a quick tuning run)")
    parser.add_argument(
        "-m", "--model", default="local", help="--method model, summariser or step: the model, as co chat -m takes it"
    )
    parser.add_argument(
        "--answers", help="--method model, summariser or step: a JSON file keeping the model's answers (resumes a run)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = load_corpus(args.split)
    if args.lang:
        rows = [row for row in rows if row.lang == args.lang]
        if not rows:
            print(f"no messages in {args.lang!r}", file=sys.stderr)
            return 2
    rows = rows[:: max(args.every, 1)]
    readers = METHODS[args.method](args, [row.text for row in rows])
    scores = score(rows, readers)
    langs = ", ".join(f"{lang} {n}" for lang, n in Counter(row.lang for row in rows).most_common())
    print(f"method {args.method}, split {args.split}: {len(rows)} messages ({langs})\n")
    for line in table(scores):
        print(line)
    if args.misses:
        for line in misses(scores):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
