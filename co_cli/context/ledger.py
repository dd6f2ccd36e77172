"""The identifier ledger: what a summary of a stretch of history must keep, found deterministically.

``extract_identifiers`` lists the identifiers of a stretch (file paths, URLs, numbers, versions, dates,
error codes, codenames, names, commands, quoted strings) from what the user typed, the assistant's
answers and the arguments of tool calls, and from any earlier co summary in the stretch (its prose and its
"Kept verbatim" list). ``check_summary`` tells which of them a summary kept; ``append_missing`` appends
the rest under a "Kept verbatim:" list that ``extract_identifiers`` reads back, so an identifier is carried
through any number of summaries of summaries. While the list has room, an identifier goes with the sentence
it was written in ("9321 — Inside the cluster the API answers on 9321."), which is read back with it.

Tool results are mostly not a source: they are long, mostly noise, and the tool call that produced them is.
A short one is (at most ``SHORT_RESULT_CHARS``, such as a grep that found one setting): it is the value
the user asked to look up, and often the only place that value was ever written.
co's acknowledgements are skipped; its summaries are recognised by their metadata marks only.
"""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.messages import ModelMessage

from co_cli.context.pins import sentence_spans
from co_cli.message_view import views
from co_cli.synthetic import LATEST_REQUEST_HEADING, SUMMARY_PREFIX, covers, is_ack, is_summary, synthetic_kind

__all__ = [
    "KEPT_VERBATIM_HEADING",
    "Identifier",
    "IdentifierKind",
    "LedgerCheck",
    "LedgerResult",
    "Source",
    "append_missing",
    "check_summary",
    "complete_paths",
    "extract_identifiers",
    "find_identifiers",
    "kept_verbatim",
    "reconcile",
    "select_missing",
    "split_kept_verbatim",
]

IdentifierKind = Literal[
    "path",
    "url",
    "number",
    "address",
    "version",
    "date",
    "error_code",
    "codename",
    "constant",
    "setting",
    "hyphenated",
    "flag",
    "handle",
    "call",
    "dotted",
    "name",
    "proper",
    "package",
    "command",
    "quoted",
    "verbatim",
]
"""``verbatim``: an item of a "Kept verbatim" list that is not one identifier of another kind; ``proper``: a name
the user wrote in plain words (a person, a project: "Maria Keller", "my project is called Tern"); ``package``: a
library named beside a version or an install command ("pydantic 2.9.1", "pip install httpx")."""

Source = Literal["user", "summary", "assistant", "tool"]

KEPT_VERBATIM_HEADING = "Kept verbatim:"
SENTENCE_MARK = " — "
"""Between an identifier and the sentence it was written in, in a "Kept verbatim" item."""

SOURCE_RANK: dict[Source, int] = {"user": 0, "summary": 0, "assistant": 1, "tool": 2}
"""Order of the ledger: what the user typed, and earlier summaries (which carry what the user typed before
them, in message order), come first."""

WHITESPACE_MATCHED: frozenset[IdentifierKind] = frozenset({"command", "quoted", "verbatim"})
"""Kinds matched with runs of whitespace collapsed (a summary may rewrap a command or a quote)."""

MAX_ITEM_CHARS = 200
"""Longer identifiers (a whole script line, a paragraph in quotes) are not ledger items."""
MAX_ARG_SCAN_CHARS = 4000
SHORT_RESULT_CHARS = 300
"""A tool result this short is scanned for identifiers (ranked after everything else)."""
"""Only the start of a long tool argument (a file's new content, say) is scanned."""


@dataclass(frozen=True)
class Identifier:
    """One identifier of a stretch of history, as it was written."""

    text: str
    kind: IdentifierKind
    source: Source
    sentence: str = ""
    """The sentence of the user's words (or of an earlier summary) it was written in, when that is short
    (at most ``MAX_ITEM_CHARS``) and says more than the identifier alone: a bare "9321" in a "Kept
    verbatim" list no longer says what it is the number of."""


# --- finding identifiers in one text ------------------------------------------------------------------

_FENCE_RE = re.compile(r"```([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_SHELL_LANGS = frozenset({"bash", "sh", "shell", "console", "zsh", "shell-session", "terminal", "fish"})
_BACKTICK_RE = re.compile(r"`([^`\n]*)`")
_TRAILING_COMMENT_RE = re.compile(r"\s+#(?:\s.*)?$")
_URL_RE = re.compile(r"\b(?:https?|ftp|wss?|ssh|git|file)://[^\s<>\"'`\]\[{}|\\^]+")
_QUOTED_RES = (
    re.compile(r"\"([^\"\n]{3,80})\""),
    re.compile(r"“([^”\n]{3,80})”"),
    re.compile(r"(?<![\w'’])'([^'\n]{3,80})'(?![\w'])"),
)

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec"
)
_DATE_RES = (
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?(?!\w)"),
    re.compile(rf"\b(?:{_MONTHS})\.? (?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?(?:,? \d{{4}})?(?![\w])"),
    re.compile(rf"\b(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)? (?:of )?(?:{_MONTHS})(?:,? \d{{4}})?\b"),
    re.compile(rf"\b(?:{_MONTHS}) \d{{4}}\b"),
    re.compile(r"\b(?:[12]\d|3[01]|0?[1-9])/(?:[12]\d|3[01]|0?[1-9])/(?:\d{4}|\d{2})\b"),
)

_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|mjs|cjs|ts|tsx|jsx|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|md|rst|txt|csv|tsv|log|"
    "sh|bash|zsh|fish|ps1|bat|sql|html|htm|css|scss|less|go|rs|rb|java|kt|kts|scala|clj|c|h|cc|cpp|hpp|cxx|cs|"
    "swift|m|mm|php|pl|lua|r|dart|ex|exs|erl|hs|ml|nix|vue|svelte|xml|proto|graphql|gql|tf|tfvars|hcl|lock|"
    "gguf|safetensors|bin|onnx|db|sqlite|sqlite3|pem|key|crt|cer|service|timer|socket|j2|jinja|tpl|tmpl|mk|"
    "cmake|gradle|zip|gz|tgz|tar|bz2|xz|whl|deb|rpm|pdf|png|jpg|jpeg|gif|svg|webp|ico|wasm|so|dll|dylib|exe|"
    "patch|diff|pid|sock|bak|orig|tmp|out|err|vim|el|plist|properties|dockerfile|editorconfig|gitignore"
)
_PATH_CHARS = r"[\w.@+~-]"
_SLASH_PATH_RE = re.compile(
    rf"(?<![\w.:/@-])(?:~|\.{{1,2}})?/?{_PATH_CHARS}+(?:/{_PATH_CHARS}+)+/?"
    rf"|(?<![\w.:/@-])(?:~|\.{{1,2}})?/{_PATH_CHARS}+/?"
)
_WINDOWS_PATH_RE = re.compile(r"\b[A-Za-z]:\\(?:[\w .-]+\\)*[\w.-]+")
_FILE_NAME_RE = re.compile(rf"(?<![\w.@/-])[\w-]*[A-Za-z_][\w.-]*\.(?:{_EXTENSIONS})(?![\w-])", re.IGNORECASE)
_DOTFILE_RE = re.compile(r"(?<![^\s\"'`(\[])\.[a-z][\w-]{2,}(?:\.[a-z]{1,6})?(?![\w.-])")
_SPECIAL_FILES_RE = re.compile(
    r"\b(?:Makefile|Dockerfile|Containerfile|Jenkinsfile|Procfile|Gemfile|Vagrantfile|Justfile|Caddyfile)\b"
)
_HANDLE_RE = re.compile(r"(?<![\w@.])@[A-Za-z0-9][\w-]{1,38}(?![\w@])")
_EXCEPTION_RE = re.compile(r"\b[A-Z][A-Za-z0-9]+(?:Error|Exception|Warning)\b")
_ERRNO_NAMES = frozenset(errno.errorcode.values())
_ERRNO_RE = re.compile(r"\bE[A-Z0-9]{2,}\b")
_CVE_RE = re.compile(r"\b(?:CVE-\d{4}-\d{4,}|GHSA(?:-[a-z0-9]{4}){3})\b")
_ERROR_NUMBER_RE = re.compile(r"\b[A-Z]{1,4}-?\d{3,5}\b")
_SETTING_RE = re.compile(r"(?<![\w.-])[A-Za-z_][\w.-]{2,}=[^\s,;()\[\]{}'\"`]+")
_CALL_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\((?:[^()\n]{0,40})\)")
_VERSION_RE = re.compile(r"(?<![\w.])v?\d+(?:\.\d+)+(?:-?(?:rc|alpha|beta|dev|post|pre|a|b)\.?\d*)?(?![\w])(?!\.\d)")
_ADDRESS_RE = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_CODENAME_RE = re.compile(r"\b(?=[A-Z0-9]*\d)(?=[0-9]*[A-Z][0-9]*[A-Z])[A-Z][A-Z0-9]{2,}\b")
_CONSTANT_RE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
_FLAG_RE = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?![\w-])")
_HYPHENATED_RE = re.compile(r"(?<![\w-])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+(?![\w-])")
_DOTTED_RE = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?![\w])")
_SNAKE_RE = re.compile(r"(?<![\w])_{0,2}[a-z][a-z0-9]*(?:_[a-z0-9]+)+_{0,2}(?![\w])")
_CAMEL_RE = re.compile(
    r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+(?:[A-Z][a-z0-9]*)+|[A-Z]{2,}[a-z]{2,}[A-Za-z0-9]*)\b"
)
_NUMBER_RE = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d{3,})(?![\w]|[.,]\d)")

_TRAILING_PUNCT = ".,:;!?)]}>'\""

_COMMON_WORDS_TEXT = """
    the and for are but not you all any can had her was one our out day get has him his how man new now old
    see two way who boy did its let put say she too use yes no true false none null nil this that with from
    have what when where which while will would should could there their then them they these those here
    about after again also back been before being both each even every first just like made make many more
    most much must need only other over same some such than very want well were your into just code file
    text data list test tests name value error output input user model note todo fixme ok okay done
"""
_COMMON_WORDS = frozenset(_COMMON_WORDS_TEXT.split())

_COMMON_HYPHENATED_TEXT = """
    well-known so-called built-in follow-up follow-ups up-to-date out-of-date real-time long-term short-term
    open-source high-level low-level end-to-end one-off step-by-step e-mail re-run read-only read-write
    front-end back-end full-text third-party first-class side-effect side-effects trade-off trade-offs
    day-to-day user-facing left-hand right-hand one-time case-sensitive case-insensitive in-memory on-disk
    plain-text top-level multi-line single-line long-running state-of-the-art hands-on know-how how-to
    to-do in-place out-of-the-box opt-in opt-out sign-in sign-up log-in set-up check-in write-up
    all-in-one one-line two-line one-liner half-way so-so x-ray t-shirt co-worker
"""
_COMMON_HYPHENATED = frozenset(_COMMON_HYPHENATED_TEXT.split())
_COMMON_HYPHEN_PREFIXES = frozenset({"self", "well", "non", "so", "half", "semi", "anti", "ex", "re", "co", "pre"})
_COMMON_HYPHEN_SUFFIXES_TEXT = (
    "like based level wise side time term free friendly safe aware specific related oriented driven style ish "
    "ready heavy only sized scale wide"
)
_COMMON_HYPHEN_SUFFIXES = frozenset(_COMMON_HYPHEN_SUFFIXES_TEXT.split())
_RULE_PREFIX_KEEP = frozenset({"pre-commit", "pre-push", "re-export", "co-author"})


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _clean(text: str) -> str:
    return text.strip().rstrip(_TRAILING_PUNCT).strip()


def _keep_hyphenated(word: str) -> bool:
    lower = word.lower()
    if not any(ch.isalpha() for ch in lower):
        return False
    if any(ch.isdigit() for ch in lower):
        return True
    if lower in _RULE_PREFIX_KEEP:
        return True
    if lower in _COMMON_HYPHENATED:
        return False
    segments = lower.split("-")
    if len(segments) > 4:
        return False
    if segments[0] in _COMMON_HYPHEN_PREFIXES or segments[-1] in _COMMON_HYPHEN_SUFFIXES:
        return False
    return len(lower) >= 5


def _keep_path(path: str) -> bool:
    if path.startswith(("/", "~/", "./", "../")) and len(path) >= 3:
        return any(ch.isalnum() for ch in path)
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if _FILE_NAME_RE.fullmatch(last) or _DOTFILE_RE.fullmatch(last):
        return True
    if path.count("/") >= 2 and not path.endswith("/"):
        return True
    # one slash and no extension: "src/co_cli" or "tests/" are paths, "and/or" is not
    return path.endswith("/") and len(path) > 3 or any(ch in path for ch in "_.") or any(c.isdigit() for c in path)


def _keep_dotted(name: str) -> bool:
    segments = name.split(".")
    if all(len(segment) <= 1 for segment in segments):
        return False  # e.g, i.e, U.S
    return name.lower() not in {"e.g", "i.e", "etc", "vs", "a.m", "p.m"}


def _classify_backtick(inner: str) -> IdentifierKind | None:
    if any(ch.isspace() for ch in inner):
        return "command"
    found = _scan(inner)
    if len(found) == 1 and found[0][0] == inner:
        return found[0][1]
    if len(inner) < 3 or inner.lower() in _COMMON_WORDS or not any(ch.isalnum() for ch in inner):
        return None
    return "command"


_LONG_RUN_RE = re.compile(rf"\S{{{MAX_ITEM_CHARS + 1},}}")


class _Masked:
    """A text whose claimed spans are blanked, so a later, looser pattern cannot match inside them.

    Runs of more than ``MAX_ITEM_CHARS`` non-blank characters (base64, minified code) are blanked first:
    they hold no ledger item, and they would make the looser patterns backtrack for long."""

    def __init__(self, text: str) -> None:
        self.chars = list(text)
        for match in _LONG_RUN_RE.finditer(text):
            self.claim(match.start(), match.end())
        self.found: list[tuple[int, str, IdentifierKind]] = []

    @property
    def text(self) -> str:
        return "".join(self.chars)

    def claim(self, start: int, end: int) -> None:
        for i in range(start, end):
            if self.chars[i] != "\n":
                self.chars[i] = " "

    def add(self, start: int, end: int, text: str, kind: IdentifierKind, *, claim: bool = True) -> None:
        text = text.strip()
        if 3 <= len(text) <= MAX_ITEM_CHARS and "\n" not in text:
            self.found.append((start, text, kind))
        if claim:
            self.claim(start, end)

    def scan(self, pattern: re.Pattern[str], kind: IdentifierKind, keep: Any = None, *, clean: bool = False) -> None:
        for match in pattern.finditer(self.text):
            text = _clean(match.group(0)) if clean else match.group(0)
            if keep is not None and not keep(text):
                continue
            self.add(match.start(), match.end(), text, kind)


def _unbalanced_quotes(text: str) -> bool:
    return text.count("'") % 2 == 1 or text.count('"') % 2 == 1


def _code_blocks(masked: _Masked) -> None:
    for match in _FENCE_RE.finditer(masked.text):
        language = match.group(1).lower()
        body_start = match.start(2)
        if language in _SHELL_LANGS:
            offset = body_start
            for line in match.group(2).split("\n"):
                command = line.strip()
                if command.startswith(("$ ", "% ", "> ")):
                    command = command[2:].strip()
                if not _unbalanced_quotes(command):
                    command = _TRAILING_COMMENT_RE.sub("", command)
                if command and not command.startswith("#"):
                    masked.add(offset, offset, command, "command", claim=False)
                offset += len(line) + 1
            masked.claim(match.start(), match.end())
        else:
            masked.claim(match.start(), body_start)  # the fence line; the code is read as text
            if match.group(0).endswith("```"):
                masked.claim(match.end() - 3, match.end())


_CAPITALISED = r"[A-Z][a-z]+(?:['’-][A-Z]?[a-z]+)?"
_PROPER_NAME_RE = re.compile(rf"(?<![\w.@/-]){_CAPITALISED}(?:[ \t]+{_CAPITALISED}){{1,3}}(?![\w-])")
_CUED_NAME_RE = re.compile(
    r"(?i:\b(?:my name is|i'm|i am|call me|called|named|owned by|approved by|reviewed by|signed off by|ask|ping|"
    r"assigned to|maintained by|owner is|maintainer is|lead is))[ \t]+"
    rf"({_CAPITALISED}(?:[ \t]+{_CAPITALISED}){{0,2}})(?![\w-])"
)
_NAME_BEFORE_VERB_RE = re.compile(
    rf"(?<![\w.@/-])({_CAPITALISED})[ \t]+(?:must|has to|needs to|should|will|has the final say|signs off)"
    r"(?:[ \t]+\w+)?[ \t]+(?:approve|review|sign off|decide)"
)
_PACKAGE_BEFORE_VERSION_RE = re.compile(
    r"(?<![\w.@/-])([a-z][a-z0-9_.-]*[a-z0-9])(?:[ \t]+v?|@|==|>=|<=|~=)\d+(?:\.\d+)+(?![\w])"
)
_PACKAGE_INSTALL_RE = re.compile(
    r"\b(?:pip3? install|uv add|uv pip install|poetry add|npm (?:install|i)|yarn add|pnpm add|cargo add|gem install|"
    r"go get|brew install|apt(?:-get)? install)([^\n;,!?`]*)"
)
_PACKAGE_NOUN_RE = re.compile(
    r"\b([a-z][a-z0-9_.-]*[a-z0-9])[ \t]+(?:library|package|crate|gem|dependency)\b"
    r"|\b(?:library|package|crate|gem|dependency)[ \t]+([a-z][a-z0-9_.-]*[a-z0-9])\b"
)
_NOT_NAME_WORDS_TEXT = """
    the a an and or but if when while then so as at by for from in into of on to with without this that these
    those there here my our your his her their its we i you he she they it me us them hi hello hey thanks thank
    yes no not please let let's also just maybe every each all any some most many more next last first second
    today tomorrow yesterday monday tuesday wednesday thursday friday saturday sunday january february march
    april may june july august september october november december what why how who which where can could would
    should will shall do does did is are was were be been being have has had one two three goal goals
    instructions instruction constraints decisions decision files file identifiers errors error fixes fix failed
    approaches pending step steps standing kept verbatim summary user users assistant tool tools result results
    earlier note notes digest conversation messages message request latest tried new old good great sure ok okay
    done understood got noted use using run running see check read write make keep never always don't do
"""
_NOT_NAME_WORDS = frozenset(_NOT_NAME_WORDS_TEXT.split())
_NOT_PACKAGE_TEXT = """
    version versions release releases pinned pin upgrading upgrade upgraded downgrade downgraded python than
    v vs about around over under above below since until port ports line lines step revision rev build
"""
_NOT_PACKAGE_WORDS = _COMMON_WORDS | _NOT_NAME_WORDS | frozenset(_NOT_PACKAGE_TEXT.split())


def _proper_name(text: str) -> tuple[int, int] | None:
    """Where in ``text`` the name is: without the common capitalised words at its ends (a sentence's first word,
    "The", a weekday), when at least two words of a name remain."""
    words = list(re.finditer(r"\S+", text))
    while words and words[0].group().lower() in _NOT_NAME_WORDS:
        words.pop(0)
    while words and words[-1].group().lower() in _NOT_NAME_WORDS:
        words.pop()
    return (words[0].start(), words[-1].end()) if len(words) >= 2 else None


def _cued_name(text: str) -> tuple[int, int] | None:
    """Where in ``text`` (the words after a cue) the name is: without common words at its end, none when it
    starts with one."""
    words = list(re.finditer(r"\S+", text))
    while words and words[-1].group().lower() in _NOT_NAME_WORDS:
        words.pop()
    if not words or words[0].group().lower() in _NOT_NAME_WORDS:
        return None
    return words[0].start(), words[-1].end()


def _packages(masked: _Masked) -> None:
    """Packages named beside an install command, a version or the word "library" (see ``IdentifierKind``)."""
    for match in _PACKAGE_INSTALL_RE.finditer(masked.text):
        offset = match.start(1)
        for word in re.finditer(r"\S+", match.group(1)):
            token = word.group(0)
            if token.startswith("-"):
                continue
            name = _clean(token)
            if name.lower() in _NOT_PACKAGE_WORDS or not name[:1].isalpha():
                break
            masked.add(offset + word.start(), offset + word.start() + len(name), name, "package")
            if token != name:
                break  # the sentence ends here
    for pattern in (_PACKAGE_BEFORE_VERSION_RE, _PACKAGE_NOUN_RE):
        for match in pattern.finditer(masked.text):
            group = 1 if match.group(1) else 2
            name = match.group(group)
            if name.lower() not in _NOT_PACKAGE_WORDS and len(name) >= 3:
                masked.add(match.start(group), match.end(group), name, "package")


def _proper_names(masked: _Masked) -> None:
    """People and projects the user named in plain words: two or more capitalised words, or one after a cue
    ("my name is", "approved by", "Priya must approve")."""
    for match in _PROPER_NAME_RE.finditer(masked.text):
        _add_name(masked, match.start(), _proper_name(match.group(0)))
    for pattern in (_CUED_NAME_RE, _NAME_BEFORE_VERB_RE):
        for match in pattern.finditer(masked.text):
            _add_name(masked, match.start(1), _cued_name(match.group(1)))


def _add_name(masked: _Masked, offset: int, span: tuple[int, int] | None) -> None:
    """The name at ``span`` of a match that starts at ``offset``, its words joined by one space (the patterns
    allow several spaces or a tab between them)."""
    if span is not None:
        start, end = offset + span[0], offset + span[1]
        masked.add(start, end, " ".join(masked.text[start:end].split()), "proper")


def _scan(text: str) -> list[tuple[str, IdentifierKind]]:
    """The identifiers of one text, in order of appearance (with repeats)."""
    return [(found, kind) for _, found, kind in _scan_at(text)]


def _scan_at(text: str) -> list[tuple[int, str, IdentifierKind]]:
    """``_scan`` with where each identifier starts in ``text``."""
    masked = _Masked(text)
    _code_blocks(masked)
    for match in _BACKTICK_RE.finditer(masked.text):
        inner = match.group(1).strip()
        kind = _classify_backtick(inner) if 2 <= len(inner) <= MAX_ITEM_CHARS else None
        if kind is not None:
            masked.add(match.start(1), match.end(1), inner, kind)
        masked.claim(match.start(), match.end())
    masked.scan(_URL_RE, "url", clean=True)
    for pattern in _QUOTED_RES:
        for match in pattern.finditer(masked.text):
            inner = match.group(1).strip()
            if any(ch.isspace() for ch in inner) and any(ch.isalnum() for ch in inner):
                masked.add(match.start(1), match.end(1), inner, "quoted", claim=False)
    for pattern in _DATE_RES:
        masked.scan(pattern, "date")
    masked.scan(_WINDOWS_PATH_RE, "path", clean=True)
    masked.scan(_SLASH_PATH_RE, "path", _keep_path, clean=True)
    masked.scan(_FILE_NAME_RE, "path", clean=True)
    masked.scan(_SPECIAL_FILES_RE, "path")
    masked.scan(_DOTFILE_RE, "path")
    masked.scan(_HANDLE_RE, "handle")
    masked.scan(_CVE_RE, "error_code")
    masked.scan(_EXCEPTION_RE, "error_code")
    masked.scan(_ERRNO_RE, "error_code", lambda word: word in _ERRNO_NAMES)
    for match in _CALL_RE.finditer(masked.text):
        inner = match.group(0)[len(match.group(1)) + 1 : -1].strip().lower()
        if inner in ("s", "es"):  # "file(s)"
            continue
        masked.add(match.start(), match.end(), match.group(1), "call")
    masked.scan(_SETTING_RE, "setting", clean=True)
    _packages(masked)
    masked.scan(_CONSTANT_RE, "constant")
    for i, (start, text_found, kind) in enumerate(masked.found):
        if kind == "constant" and ("ERR" in text_found or "FAIL" in text_found):
            masked.found[i] = (start, text_found, "error_code")
    masked.scan(_ERROR_NUMBER_RE, "error_code", lambda word: any(ch.isalpha() for ch in word))
    for match in _VERSION_RE.finditer(masked.text):
        version = match.group(0)
        masked.add(match.start(), match.end(), version, "address" if _ADDRESS_RE.match(version) else "version")
    masked.scan(_CODENAME_RE, "codename")
    masked.scan(_FLAG_RE, "flag", lambda word: len(word) >= 5)
    masked.scan(_HYPHENATED_RE, "hyphenated", _keep_hyphenated)
    masked.scan(_DOTTED_RE, "dotted", _keep_dotted)
    masked.scan(_SNAKE_RE, "name", lambda word: len(word.strip("_")) >= 4)
    _proper_names(masked)
    masked.scan(_CAMEL_RE, "name", lambda word: len(word) >= 4)
    masked.scan(_NUMBER_RE, "number")
    masked.found.sort(key=lambda item: item[0])
    return masked.found


def find_identifiers(text: str) -> list[tuple[str, IdentifierKind]]:
    """The distinct identifiers of one text as (text, kind), in order of appearance."""
    seen: set[str] = set()
    out: list[tuple[str, IdentifierKind]] = []
    for text_found, kind in _scan(text):
        if text_found not in seen:
            seen.add(text_found)
            out.append((text_found, kind))
    return out


# --- the "Kept verbatim" list ---------------------------------------------------------------------------

_KEPT_HEADING_RE = re.compile(r"^[ \t>#*_]*kept verbatim[*_]*:?[*_]*[ \t]*$", re.IGNORECASE | re.MULTILINE)
_ITEM_RE = re.compile(r"^[ \t]*(?:[-*•]|\d+[.)])[ \t]+(.+?)[ \t]*$")


def split_kept_verbatim(text: str) -> tuple[str, list[str]]:
    """``text`` without its "Kept verbatim" lists, and their items (verbatim, in order)."""
    lines = text.split("\n")
    prose: list[str] = []
    items: list[str] = []
    i = 0
    while i < len(lines):
        if not _KEPT_HEADING_RE.match(lines[i]):
            prose.append(lines[i])
            i += 1
            continue
        i += 1
        while i < len(lines):
            item = _ITEM_RE.match(lines[i])
            if item is not None:
                value = item.group(1)
                if len(value) >= 2 and value.startswith("`") and value.endswith("`") and value.count("`") == 2:
                    value = value[1:-1]
                if value.strip():
                    items.append(value.strip())
            elif lines[i].strip():
                break
            i += 1
    return "\n".join(prose), items


def kept_verbatim(text: str) -> list[str]:
    """The items of ``text``'s "Kept verbatim" lists."""
    return split_kept_verbatim(text)[1]


def _item_kind(item: str) -> IdentifierKind:
    found = _scan(item)
    if len(found) == 1 and found[0][0] == item:
        return found[0][1]
    return "verbatim"


def _item_identifiers(item: str) -> Iterator[tuple[str, IdentifierKind, str]]:
    """What one "Kept verbatim" item carries: the identifier, and, for an item written with the sentence it
    came from ("9321 — Inside the cluster the API answers on 9321."), that sentence's other identifiers."""
    if "\n" in item or len(item) > 2 * MAX_ITEM_CHARS:
        return
    head, mark, sentence = item.partition(SENTENCE_MARK)
    head = head.strip()
    if not (mark and head and len(head) <= MAX_ITEM_CHARS and _contains(sentence, head)):
        if len(item) <= MAX_ITEM_CHARS:
            yield item, _item_kind(item), ""
        return
    yield head, _item_kind(head), sentence
    for found, kind in _scan(sentence):
        if found != head:
            yield found, kind, sentence


# --- a stretch of messages --------------------------------------------------------------------------------


def _summary_body(message: ModelMessage, text: str) -> str:
    """A summary's text without co's own prefix (or a static marker's whole wording), by its recorded size."""
    n = covers(message)
    if synthetic_kind(message) == "marker":
        _, sep, latest = text.partition(f"\n{LATEST_REQUEST_HEADING}\n")
        return latest if sep else ""
    prefix = SUMMARY_PREFIX.format(n=n) if n is not None else None
    if prefix and text.startswith(prefix):
        return text[len(prefix) :]
    return text


def _string_values(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _string_values(v, str(k))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _string_values(v, key)


_PATH_KEYS = frozenset({"path", "file", "file_path", "filepath", "filename", "directory", "dir", "cwd"})
_COMMAND_KEYS = frozenset({"command", "cmd", "script"})


def _argument_identifiers(args_text: str) -> Iterator[tuple[str, IdentifierKind]]:
    try:
        args: Any = json.loads(args_text) if args_text.strip() else {}
    except ValueError:
        args = args_text
    for key, value in _string_values(args):
        stripped = value.strip()
        lower_key = key.lower()
        if lower_key in _COMMAND_KEYS and 3 <= len(stripped) <= MAX_ITEM_CHARS and "\n" not in stripped:
            yield stripped, "command"
        elif lower_key in _PATH_KEYS and len(stripped) >= 3 and "\n" not in stripped and stripped not in ("..",):
            yield stripped, "path"
        elif lower_key in ("pattern", "query", "regex", "glob") and 3 <= len(stripped) <= 80:
            yield stripped, "quoted"
        yield from _scan(value[:MAX_ARG_SCAN_CHARS])


def _in_sentences(text: str, *, prose: bool = False) -> Iterator[tuple[str, IdentifierKind, str]]:
    """The identifiers of ``text``, each with the sentence it is written in (see ``Identifier.sentence``). No
    sentence is one cut short ("…": shortened words, a digest's cut prose), and in a summary's ``prose`` a
    heading is none, nor is the sentence of a capitalised name: the summariser wrote those, and the sentence
    is mostly its own heading or label ("## Goal: Improve Checkout …")."""
    spans = sentence_spans(text)
    for start, found, kind in _scan_at(text):
        sentence = next((" ".join(text[s:e].split()) for s, e in spans if s <= start < e), "")
        fits = sentence != found and len(sentence) <= MAX_ITEM_CHARS and _contains(sentence, found)
        fits = fits and "…" not in sentence and not (prose and (kind == "proper" or sentence.startswith("#")))
        yield found, kind, sentence if fits else ""


def _message_identifiers(message: ModelMessage) -> Iterator[tuple[str, IdentifierKind, Source, str]]:
    if is_ack(message):
        return
    if is_summary(message):
        for view in views(message):
            if view.kind != "user":
                continue
            prose, items = split_kept_verbatim(_summary_body(message, view.text))
            for text, kind, sentence in _in_sentences(prose, prose=True):
                yield text, kind, "summary", sentence
            for item in items:
                for text, kind, sentence in _item_identifiers(item):
                    yield text, kind, "summary", sentence
        return
    for view in views(message):
        if view.kind == "user":
            for text, kind, sentence in _in_sentences(view.text):
                yield text, kind, "user", sentence
        elif view.kind == "text":
            for text, kind in _scan(view.text):
                yield text, kind, "assistant", ""
        elif view.kind == "tool-call":
            for text, kind in _argument_identifiers(view.text):
                yield text, kind, "tool", ""
        elif view.kind == "tool-return" and len(view.text) <= SHORT_RESULT_CHARS and "[…" not in view.text:
            # (co's own "[…truncated" and "[… clamped" marks: a cut output was not short)
            for text, kind in _scan(view.text):
                yield text, kind, "tool", ""


def _ranked(identifiers: Iterable[Identifier]) -> list[Identifier]:
    return sorted(identifiers, key=lambda ident: SOURCE_RANK[ident.source])  # stable: first-seen order kept


def extract_identifiers(messages: Sequence[ModelMessage]) -> list[Identifier]:
    """The distinct identifiers of a stretch of history: what the user typed and earlier summaries first (in
    message order), then the assistant's answers, then tool-call arguments; each in first-seen order."""
    seen: set[str] = set()
    found: list[Identifier] = []
    for message in messages:
        for text, kind, source, sentence in _message_identifiers(message):
            if text in seen:
                continue
            seen.add(text)
            found.append(Identifier(text, kind, source, sentence))
    return _ranked(found)


# --- checking a summary -----------------------------------------------------------------------------------


def _normalise_space(text: str) -> str:
    return " ".join(text.split())


def _contains(haystack: str, needle: str) -> bool:
    """``needle`` in ``haystack``, not as part of a longer word or number ("800" is not in "8000")."""
    if not needle:
        return True
    start = 0
    edge_before = _is_word_char(needle[0])
    edge_after = _is_word_char(needle[-1])
    while (i := haystack.find(needle, start)) >= 0:
        end = i + len(needle)
        before_ok = not (edge_before and i > 0 and _is_word_char(haystack[i - 1]))
        after_ok = not (edge_after and end < len(haystack) and _is_word_char(haystack[end]))
        if before_ok and after_ok:
            return True
        start = i + 1
    return False


@dataclass(frozen=True)
class LedgerCheck:
    """Which identifiers of a stretch a summary kept."""

    kept: tuple[Identifier, ...]
    missing: tuple[Identifier, ...]

    @property
    def total(self) -> int:
        return len(self.kept) + len(self.missing)

    def line(self, appended: int | None = None) -> str:
        """One line for the compaction record: "summary kept 31/40 identifiers; 9 appended" (``appended``
        defaults to every missing one)."""
        if self.total == 0:
            return "no identifiers to check"
        text = f"summary kept {len(self.kept)}/{self.total} identifiers"
        if self.missing:
            count = len(self.missing) if appended is None else appended
            text += f"; {count} appended"
            if count < len(self.missing):
                text += f", {len(self.missing) - count} over the limit"
        return text


def check_summary(summary_text: str, identifiers: Sequence[Identifier]) -> LedgerCheck:
    """Split ``identifiers`` into those ``summary_text`` holds verbatim and those it lacks. Case-sensitive;
    commands and quoted strings are compared with whitespace collapsed."""
    spaced = _normalise_space(summary_text)
    kept: list[Identifier] = []
    missing: list[Identifier] = []
    for ident in identifiers:
        if ident.kind in WHITESPACE_MATCHED:
            present = _contains(spaced, _normalise_space(ident.text))
        else:
            present = _contains(summary_text, ident.text)
        (kept if present else missing).append(ident)
    return LedgerCheck(tuple(kept), tuple(missing))


def _file_name(path: str) -> str | None:
    """The last part of a path when it names a file ("settings.prod.toml"), else None."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name if len(name) >= 4 and "." in name.strip(".") else None


def complete_paths(summary_text: str, identifiers: Sequence[Identifier]) -> str:
    """``summary_text`` with each bare file name that stands for exactly one path of the stretch written as
    that path ("settings.prod.toml" -> "deploy/ledger/settings.prod.toml"). A small summariser drops
    directories, and a name alone leaves the assistant guessing which file was meant; a name that two paths
    share is left as written."""
    paths: dict[str, set[str]] = {}
    for ident in identifiers:
        name = _file_name(ident.text) if ident.kind == "path" and "/" in ident.text else None
        if name is not None:
            paths.setdefault(name, set()).add(ident.text)
    for name, found in paths.items():
        if len(found) == 1:
            (path,) = found
            bare = re.compile(rf"(?<![\w./~-]){re.escape(name)}(?![\w/-]|\.\w)")
            summary_text = bare.sub(path.replace("\\", "\\\\"), summary_text)
    return summary_text


def _item_line(ident: Identifier) -> str:
    return f"- {ident.text}"


def select_missing(check: LedgerCheck, *, max_items: int = 40, max_chars: int = 2000) -> list[Identifier]:
    """The missing identifiers ``append_missing`` lists: user-typed and earlier-summary ones first, at most
    ``max_items`` and about ``max_chars`` characters of list."""
    chosen: list[Identifier] = []
    used = len(KEPT_VERBATIM_HEADING) + 2
    for ident in _ranked(check.missing):
        if len(chosen) >= max_items:
            break
        if "\n" in ident.text:
            continue
        cost = len(_item_line(ident)) + 1
        if used + cost > max_chars:
            continue
        chosen.append(ident)
        used += cost
    return chosen


def _listed_lines(chosen: Sequence[Identifier], max_chars: int) -> list[str]:
    """The list's lines for ``chosen``: each identifier alone, then, in the same order while the list stays
    within ``max_chars``, with the sentence it was written in. An identifier whose sentence another line
    already gives needs no line of its own."""
    lines = [_item_line(ident) for ident in chosen]
    used = len(KEPT_VERBATIM_HEADING) + 2 + sum(len(line) + 1 for line in lines)
    given: set[str] = set()
    for index, ident in enumerate(chosen):
        if not ident.sentence:
            continue
        if ident.sentence in given:
            used -= len(lines[index]) + 1
            lines[index] = ""
            continue
        line = f"- {ident.text}{SENTENCE_MARK}{ident.sentence}"
        if used + len(line) - len(lines[index]) > max_chars:
            continue
        used += len(line) - len(lines[index])
        lines[index] = line
        given.add(ident.sentence)
    return [line for line in lines if line]


def append_missing(summary_text: str, check: LedgerCheck, *, max_items: int = 40, max_chars: int = 2000) -> str:
    """``summary_text`` with a "Kept verbatim:" list of the identifiers it lacks (bounded; see
    ``select_missing``), each with its sentence where the bound allows; unchanged when it lacks none."""
    chosen = select_missing(check, max_items=max_items, max_chars=max_chars)
    if not chosen:
        return summary_text
    lines = "\n".join(_listed_lines(chosen, max_chars))
    return f"{summary_text.rstrip()}\n\n{KEPT_VERBATIM_HEADING}\n{lines}"


@dataclass(frozen=True)
class LedgerResult:
    text: str
    """The summary with the missing identifiers appended."""
    check: LedgerCheck
    appended: int

    def line(self) -> str:
        return self.check.line(self.appended)


def reconcile(
    summary_text: str, messages: Sequence[ModelMessage], *, max_items: int = 40, max_chars: int = 2000
) -> LedgerResult:
    """Check a summary of ``messages`` against their ledger and append what it lacks, in one call."""
    check = check_summary(summary_text, extract_identifiers(messages))
    chosen = select_missing(check, max_items=max_items, max_chars=max_chars)
    text = append_missing(summary_text, check, max_items=max_items, max_chars=max_chars)
    return LedgerResult(text, check, len(chosen))
