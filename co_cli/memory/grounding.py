"""Whether a fact a model extracted is one the user's message actually states.

A small model asked for durable facts about the user answers with what it knows instead ("Lyon is a city in
France", a paragraph on `pprof` for "How do I profile a Go program?"), with what happened ("The build broke
again"), with the colleague's habit as the user's own ("The user uses emacs" for "My colleague Bob uses
emacs"), and with the words around a password ("The user is using a staging database"). These checks are
read from the message alone, so they hold whatever the model writes:

- a message that only asks (questions, one-off requests, nothing said about the user) is not sent at all;
- a fact's names, numbers and quoted words must be the user's own;
- a fact is about someone: the user, or a name the user wrote;
- a fact that says of the user what the message says of another person is refused;
- nothing is taken from a sentence that holds a secret;
- a message that says something changed ("moved to", "switched", "slipped", "now") makes its fact replace the
  memory on the same topic, when the model did not say so itself (``says_change``).
"""

from __future__ import annotations

import re

from co_cli.context.pins import sentences
from co_cli.memory.retrieval import topic_terms, words
from co_cli.secrets import find_secret

_REQUEST_START = re.compile(
    r"^(?:please\s+|(?:can|could|would|will) you\s+(?:please\s+)?)?"
    r"(?:explain|show|write|give|tell|translate|make|create|generate|list|summari[sz]e|describe|compare|fix|"
    r"refactor|help|find|convert|rewrite|draft|suggest|recommend|review|check|debug|implement|add|run|build)\b",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(?:what|what's|whats|how|why|when|where|which|who|is|are|can|could|should|would|does|do|did|will)\b",
    re.IGNORECASE,
)
_ABOUT_ME = re.compile(
    r"\b(?:my|mine|our|ours|i'm|i’m|i've|i’ve|we're|we’re)\b"
    r"|(?<!\bdo )(?<!\bcan )(?<!\bshould )(?<!\bcould )(?<!\bwould )(?<!\bwill )(?<!\bmay )(?<!\bmust )(?<!\bdid )"
    r"\b(?:I|we)\s+[a-z]+",
    re.IGNORECASE,
)
_REMEMBER = re.compile(r"\bremember\b|\bnote that\b|\bkeep in mind\b", re.IGNORECASE)


def only_asks(message: str) -> bool:
    """Whether ``message`` only asks for something ("How do I profile a Go program?", "Write me a regex for ISO
    dates"): every sentence a question or a request, and nothing said about the user ("I use fish, how do I ...?"
    and "Remember that ..." say something)."""
    found = sentences(message)
    if not found or _ABOUT_ME.search(message) or _REMEMBER.search(message):
        return False
    return all(s.rstrip("\"')]").endswith("?") or _QUESTION_START.search(s) or _REQUEST_START.search(s) for s in found)


_SENTENCE_STARTERS = frozenset(
    ("the", "a", "an", "this", "that", "these", "those", "it", "its", "he", "she", "they", "their", "his", "her")
    + ("there", "here", "user", "users")
)
_NAMED = re.compile(r"`([^`]+)`|[\"“]([^\"”]+)[\"”]|(?<!\w)'([^']{2,})'(?!\w)|\b([A-Z][\w-]*|\w*\d\w*)\b")


def _stem(word: str) -> str:
    return word.lower().removesuffix("'s").removesuffix("’s")


def _named(fact: str) -> list[str]:
    """The fact's names, numbers and quoted words (a capitalised first word only when it is not a plain
    sentence start: "Kestrel is ..." names Kestrel, "The user ..." names nothing)."""
    found: list[str] = []
    for match in _NAMED.finditer(fact):
        quoted = match.group(1) or match.group(2) or match.group(3)
        token = match.group(4)
        if quoted:
            found += words(quoted)
        elif token != "I" and not (match.start() == 0 and token.lower() in _SENTENCE_STARTERS):
            found.append(token)
    return [_stem(t) for t in found]


def grounded(fact: str, source: str) -> bool:
    """Whether every name, number and quoted word of ``fact`` is in ``source`` (the user's message, and for an
    update the memory it changes), and the fact is about the user or someone the user named."""
    said = {_stem(w) for w in words(source)}
    named = _named(fact)
    if any(n not in said for n in named):
        return False
    lower = fact.lower()
    if "user" in words(lower) or "user's" in words(lower):
        return not lower.startswith(("a ", "an "))
    return bool(named) and not lower.startswith(("a ", "an "))


_USER_PREDICATE = re.compile(r"the user\s+(?:(?:always|usually|also|mostly|now|still)\s+)?(\w+\s+\w+)", re.IGNORECASE)


def misattributed(fact: str, message: str) -> bool:
    """Whether ``fact`` says of the user what ``message`` says of someone else ("The user uses emacs" for "My
    colleague Bob uses emacs"). The user speaks in the first person ("I use vim"), so the fact's third-person
    words found as they are in the message had another subject."""
    match = _USER_PREDICATE.match(fact)
    if match is None:
        return False
    found = re.search(rf"(\w+)\s+{re.escape(match.group(1))}\b", message, re.IGNORECASE)
    return found is not None and found.group(1).lower() not in ("i", "we")


_CLAUSE = re.compile(r"\s*(?:[;,]|\b(?:and|but|while)\b)\s*", re.IGNORECASE)


def from_a_secret(fact: str, message: str) -> bool:
    """Whether ``fact`` is about a clause of ``message`` that holds a secret: half its topic words or more are
    that clause's ("The user is using a staging database" for "The staging database password is tulip42, ...")."""
    topic = set(topic_terms(fact))
    if not topic:
        return False
    for sentence in sentences(message):
        for clause in _CLAUSE.split(sentence):
            if find_secret(clause) is not None and len(topic & set(words(clause))) * 2 >= len(topic):
                return True
    return False


_CHANGE = re.compile(
    r"\b(?:moved|switched|changed|slipped|moved|postponed|pushed back|brought forward|replaced|instead|"
    r"no longer|not anymore|any ?more|left|took over|now|new|since)\b",
    re.IGNORECASE,
)


def says_change(message: str) -> bool:
    """Whether the user says something changed ("I moved to Lyon", "the deadline slipped", "Carol reviews my
    pull requests now")."""
    return _CHANGE.search(message) is not None
