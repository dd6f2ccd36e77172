"""The memory store: soft delete, events, undo, proposals, import, the extraction queue, and secret refusal."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

import pytest

from co_cli.errors import CoError
from co_cli.memory import memory_file
from co_cli.secrets import find_secret
from co_cli.store.db import Database, connect
from co_cli.store.memories import Memories, MemoryNotFound, MemoryRefused, Subject
from co_cli.store.queue import ExtractionQueue
from co_cli.store.schema import SCHEMA_VERSION

PROJECT = "/repo/one"


def test_migration_creates_the_memory_tables(tmp_path: Path) -> None:
    conn = connect(tmp_path / "co.db")
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema")}
    assert {"memories", "memory_events", "memories_fts", "memory_queue"} <= names
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_add_get_and_ids(store: Memories) -> None:
    a = store.add("The user prefers tabs", actor="user", kind="preference")
    b = store.add("Run make check first", actor="model", kind="instruction", scope="project", project=PROJECT)
    assert (a.ref, b.ref) == ("m1", "m2")
    assert store.get("M2").project == PROJECT and store.get("2").kind == "instruction"
    assert store.get("m1").project == ""  # user memories belong to no project


def test_a_memory_keeps_its_topic_and_whom_it_is_about(store: Memories) -> None:
    plain = store.add("Tabs, never spaces", actor="user")  # /remember and co memory add: no subject
    assert (plain.topic, plain.about, plain.person, plain.whose) == (None, None, None, "")
    home = store.add("Vivo en Valencia", actor="extractor", subject=Subject("home_city", "user"))
    colleague = store.add(
        "Моя коллега Ольга пишет на Kotlin", actor="extractor", subject=Subject("language", "other", "Ольга")
    )
    assert (colleague.about, colleague.person, colleague.whose) == ("other", "Ольга", "about Ольга")
    assert colleague.as_json()["person"] == "Ольга" and home.as_json()["topic"] == "home_city"
    # a person is only kept for someone else
    assert store.add("Ich mag Tee", actor="extractor", subject=Subject("drink", "user", "Jonas")).person is None
    with pytest.raises(MemoryRefused, match="unknown subject"):
        store.add("Sie mag Kaffee", actor="extractor", subject=Subject("drink", "somebody"))
    assert [m.id for m in store.with_topics(["home_city", "language"], PROJECT)] == [colleague.id, home.id]
    assert store.topics(PROJECT)[:2] == ["drink", "language"]
    # a replacement keeps the old subject unless given its own, and says where it came from
    moved = store.replace(home.ref, "Vivo en Sevilla desde mayo", actor="extractor", source_session="s9", source_seq=4)
    assert (moved.topic, moved.about, moved.source_session, moved.source_seq) == ("home_city", "user", "s9", 4)
    assert store.with_topics(["home_city"], PROJECT) == [moved]
    store.history.undo()
    assert store.with_topics(["home_city"], PROJECT) == [store.get(home.id)]


def test_a_proposal_keeps_its_subject_and_cue_when_accepted(store: Memories) -> None:
    proposal = store.review.propose(
        "Nunca hagas push a main", proposal="add", kind="instruction", subject=Subject("git_push", "user"),
        cue="a stated rule",
    )  # fmt: skip
    assert (proposal.cue, proposal.status) == ("a stated rule", "proposed")
    accepted = store.review.accept(proposal.ref)
    assert (accepted.status, accepted.topic, accepted.kind) == ("active", "git_push", "instruction")


@pytest.mark.parametrize("ref", ["m999", "x12", "", "m-1"])
def test_unknown_ids_are_one_line_errors(store: Memories, ref: str) -> None:
    with pytest.raises(MemoryNotFound):
        store.get(ref)


def test_forget_is_soft_and_undo_restores(store: Memories) -> None:
    m = store.add("The user's dog is called Rex", actor="user")
    store.forget(m.ref, actor="model")
    assert store.get(m.id).status == "deleted"
    assert store.list() == []
    with pytest.raises(MemoryNotFound):
        store.forget(m.ref, actor="user")  # already forgotten
    undone = store.history.undo()
    assert [(e.action, e.memory_id) for e in undone] == [("restore", m.id)]
    assert [x.text for x in store.list()] == ["The user's dog is called Rex"]


def test_undo_walks_back_change_by_change_and_never_undoes_an_undo(store: Memories) -> None:
    m = store.add("first text here", actor="user")
    store.edit(m.ref, "second text here")
    store.edit(m.ref, "third text here")
    store.history.undo()
    assert store.get(m.id).text == "second text here"
    store.history.undo()
    assert store.get(m.id).text == "first text here"
    store.history.undo()
    assert store.get(m.id).status == "deleted"  # the add itself, undone softly
    with pytest.raises(MemoryRefused, match="nothing to undo"):
        store.history.undo()


def test_replace_is_one_change_with_replaced_by(store: Memories) -> None:
    old = store.add("The user lives in Paris", actor="user")
    new = store.replace(old.ref, "The user lives in Lyon", actor="model")
    assert store.get(old.id).replaced_by == new.id and store.get(old.id).status == "deleted"
    assert [m.text for m in store.list()] == ["The user lives in Lyon"]
    store.history.undo()
    assert [m.text for m in store.list()] == ["The user lives in Paris"]
    assert store.get(old.id).replaced_by is None


def test_every_change_is_logged_with_old_and_new_text_and_actor(store: Memories) -> None:
    m = store.add("The user uses vim daily", actor="user")
    store.edit(m.ref, "The user uses neovim daily", actor="model")
    store.forget(m.ref, actor="extractor")
    log = store.history.log()
    assert [(e.action, e.actor) for e in log] == [("delete", "extractor"), ("update", "model"), ("add", "user")]
    assert (log[1].old_text, log[1].new_text) == ("The user uses vim daily", "The user uses neovim daily")


def test_proposals_accept_reject_and_update_target(store: Memories) -> None:
    target = store.add("The user works at Acme", actor="user")
    add = store.review.propose("The user likes green tea", proposal="add", source_session="s1", source_seq=3)
    upd = store.review.propose("The user works at Globex", proposal="update", target=target.id)
    dele = store.review.propose("The user works at Acme", proposal="delete", target=target.id)
    assert store.list() == [target] and len(store.review.proposals(None)) == 3
    store.review.reject(add.ref)
    assert store.get(add.id).status == "rejected"
    store.review.accept(upd.ref, text="The user works at Globex since 2025")
    assert store.get(target.id).status == "deleted" and store.get(target.id).replaced_by == upd.id
    assert [m.text for m in store.list()] == ["The user works at Globex since 2025"]
    store.review.accept(dele.ref)  # its target is gone already: nothing more to forget
    assert store.review.proposals(None) == []
    store.history.undo()
    assert [m.id for m in store.review.proposals(None)] == [dele.id]


def test_project_scope_is_isolated(store: Memories) -> None:
    store.add("The user prefers short answers", actor="user")
    store.add("Deploys go through fly.io", actor="user", scope="project", project=PROJECT)
    store.add("Deploys go through heroku", actor="user", scope="project", project="/repo/two")
    assert [m.text for m in store.list(project=PROJECT)] == [
        "The user prefers short answers",
        "Deploys go through fly.io",
    ]
    hits = store.search(["deploys"], project=PROJECT)
    assert [h.memory.text for h in hits] == ["Deploys go through fly.io"]


SECRETS = [
    "my key is sk-proj-abcdefghijklmnop1234",
    "AKIAIOSFODNN7EXAMPLE is the access key",
    "token ghp_" + "a1B2c3D4" * 5,
    "password=hunter22",
    "-----BEGIN RSA PRIVATE KEY----- MIIE",
    "the deploy token is " + secrets.token_urlsafe(32),
    "connect with postgres://admin:s3cret@db.internal/prod",
    # Common spellings of a credential in config files, shells and headers.
    "DB_PASSWORD=hunter2 in the staging env",
    "db_password = 'correcthorse'",
    "set PGPASSWORD=Tr0ub4dor before psql",
    "export MYSQL_PWD=letmein99",
    "GITHUB_TOKEN=abcdef1234567890",
    "the CI uses NPM_TOKEN=abc123def456",
    "call it with access_token=ya29.a0AfH6SMBx",
    "refresh_token: 1//0gLx-abc",
    "client_secret: GOCSPX-abcdefghijkl",
    '{"client_secret": "mysecretvalue"}',
    '"password": "hunter"',
    "Authorization: Bearer abc123def456ghi789",
    "send the header authorization=Basic dXNlcjpwYXNzd29yZDEyMw==",
    "curl -H 'Authorization: token 1a2b3c4d5e6f7a8b9c0d'",
    "the stripe webhook secret is 9f86d081884c7d659a2feaa0c55ad015",
    "api key 3f9a1c2b7d4e5f60718293a4b5c6d7e8f9012345abcdef01",
    "HEROKU_API_KEY is 01234567-89ab-cdef-0123-456789abcdef",
    "the key is 123e4567-e89b-12d3-a456-426614174000",
    "alerts go to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "https://discord.com/api/webhooks/123456789012345678/AbCdEf_GhIjKlMnOp",
    "use hf_abcdefghijklmnopqrstuvwxyzABCDEFGH for the hub",
    "Azure: DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4",
    "SECRET_KEY=django-insecure-x7",
]


@pytest.mark.parametrize("text", SECRETS)
def test_secrets_are_refused_and_nothing_reaches_the_database(store: Memories, tmp_path: Path, text: str) -> None:
    with pytest.raises(MemoryRefused, match="credential") as exc:
        store.add(text, actor="user")
    secret_part = max(text.split(), key=len)
    assert secret_part not in exc.value.message
    with pytest.raises(MemoryRefused):
        store.review.propose(text, proposal="add")
    ok = store.add("The user prefers tabs", actor="user")
    with pytest.raises(MemoryRefused):
        store.edit(ok.ref, text)
    raw = sqlite3.connect(tmp_path / "co.db")
    dump = "\n".join(raw.iterdump())
    raw.close()
    assert secret_part not in dump


SPOKEN_SECRETS = [  # (text, the secret in it): said in words, short ones included
    ("my password is tulip", "tulip"),
    ("The Jenkins password is hunter2", "hunter2"),
    ("The user's wifi password: tulip", "tulip"),
    ("the token for the staging API is abc123", "abc123"),
    ("pin: 4821", "4821"),
    ("The user's bank PIN is 0000.", "0000"),
    ("I changed my password to Summer2024 yesterday", "Summer2024"),
    ('The user\'s password is "correct horse battery"', "correct horse"),
    ("the passphrase for the backup disk was orange", "orange"),
    ("The password to access the staging database is tulip42", "tulip42"),
    ("The password used to log into staging is tulip42", "tulip42"),
]


@pytest.mark.parametrize(("text", "secret"), SPOKEN_SECRETS)
def test_secrets_said_in_words_are_refused(store: Memories, tmp_path: Path, text: str, secret: str) -> None:
    with pytest.raises(MemoryRefused, match="given in words") as exc:
        store.add(text, actor="user")
    assert secret not in exc.value.message
    assert store.list(statuses=("active", "proposed", "deleted")) == [] and store.history.log() == []


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f9a1c2b7d4e5f60718293a4b5c6d7e8f9012345 fixed it",
        "The user prefers ConfigurationManagerFactoryBuilderImpl2 names",
        "Tests live in /usr/local/lib/python3.11/site-packages/co_cli/tests",
        "The user uses the password manager 1Password",
        "The user sets max_tokens=4000 for long answers",
        "TOKENIZERS_PARALLELISM=false silences the warning",
        "The auth: flow uses SSO through Okta",
        "The password: field must not be logged",
        "The token limit is 4096 for the summariser",
        "The password to the vault is stored in 1Password",
        "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }} in the workflow",
        "OPENAI_API_KEY=$OPENAI_API_KEY is passed through",
        "set api_key: <your key> in settings.json",
        "session id 0190b2c4-7d3e-7a1f-9c2b-5e6f7a8b9c0d was the long one",
        "release commit 3f9a1c2b7d4e5f60718293a4b5c6d7e8f9012345 is tagged v2",
        "the image digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "The user prefers Bearer tokens over basic authentication",
        "Deploys use the Slack channel #deploys",
        "bypass=always is set for the cache",
        "The password is stored in the vault",
        "The password is required for login",
        "the token is expired, ask for a new one",
        "Each token is a word piece",
        "The token budget is 800",
        "The user's PIN is four digits long",
        "Pin: the versions in requirements.txt",
        "The access key is in the team's vault",
        "The user prefers passwords of 20 characters",
    ],
)
def test_ordinary_text_is_not_taken_for_a_secret(text: str) -> None:
    assert find_secret(text) is None


PROSE_SECRETS = [  # (text, the secret in it): said in prose, in nine languages, with the value in several shapes
    ("the root pw for the billing box is Quartz-88", "Quartz-88"),
    ("the shared secret is swordfish", "swordfish"),
    ("login credentials for grafana are viewer:Lantern5", "Lantern5"),
    ("the wifi key is marmalade", "marmalade"),
    ("our garage door code is 7712", "7712"),
    ("the VPN password is now Kettle42", "Kettle42"),
    ("admin:Rosebud7 works on the old router", "Rosebud7"),
    ("Router login: Xk9#mQ2$vL7p", "Xk9#mQ2$vL7p"),
    ("la contraseña del servidor de correo es Tortuga55", "Tortuga55"),
    ("la clave del wifi es mariposa", "mariposa"),
    ("el PIN de la tarjeta es 4417", "4417"),
    ("cambié la contraseña a Limonada2024", "Limonada2024"),
    ("Das Root-Passwort für den Mailserver lautet Kastanie77", "Kastanie77"),
    ("Der WLAN-Schlüssel lautet Regenbogen", "Regenbogen"),
    ("Datenbankpasswort: Eichhörnchen42", "Eichhörnchen42"),
    ("Ich habe das Kennwort auf Tannenbaum9 geändert", "Tannenbaum9"),
    ("le mot de passe admin, c'est Marmotte", "Marmotte"),
    ("la clé wifi est framboise", "framboise"),
    ("les identifiants du NAS sont backup:Citron99", "Citron99"),
    ("a senha do wifi é goiabada", "goiabada"),
    ("mudei a senha para Pitanga88", "Pitanga88"),
    ("la chiave del wifi è girasole", "girasole"),
    ("il PIN del bancomat è 9051", "9051"),
    ("本番サーバーのパスワードはSakura2024です", "Sakura2024"),
    ("暗証番号は4721です", "4721"),
    ("パスワードは「Fuji-San-88」です", "Fuji-San-88"),
    ("生产服务器的密码是Longjing88", "Longjing88"),
    ("wifi密码：chaye2024", "chaye2024"),
    ("把密码改成Yueliang66", "Yueliang66"),
    ("пароль от почты — Ромашка77", "Ромашка77"),
    ("пароль админа это Самовар", "Самовар"),
    ("ключ от wifi — Берёзка2020", "Берёзка2020"),
    ("пин-код карты 5521", "5521"),
]


@pytest.mark.parametrize(("text", "secret"), PROSE_SECRETS)
def test_secrets_said_in_prose_in_any_language_are_refused(
    store: Memories, tmp_path: Path, text: str, secret: str
) -> None:
    with pytest.raises(MemoryRefused, match="credential") as exc:
        store.add(text, actor="user")
    assert secret not in exc.value.message and exc.value.message.count("\n") == 0
    assert store.list(statuses=("active", "proposed", "deleted")) == [] and store.history.log() == []
    raw = sqlite3.connect(tmp_path / "co.db")
    dump = "\n".join(raw.iterdump())
    raw.close()
    assert secret not in dump


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c for c in text)


def _math_bold(text: str) -> str:
    def bold(c: str) -> str:
        if c.isascii() and c.isupper():
            return chr(0x1D400 + ord(c) - ord("A"))
        if c.isascii() and c.islower():
            return chr(0x1D41A + ord(c) - ord("a"))
        if c.isascii() and c.isdigit():
            return chr(0x1D7CE + ord(c) - ord("0"))
        return c

    return "".join(bold(c) for c in text)


GITHUB_TOKEN = "token ghp_" + "a1B2c3D4" * 5


@pytest.mark.parametrize(
    ("disguised", "plain"),
    [
        (_full_width(GITHUB_TOKEN), GITHUB_TOKEN),
        (_full_width("AKIAIOSFODNN7EXAMPLE is the access key"), "AKIAIOSFODNN7EXAMPLE is the access key"),
        (_math_bold("AKIAIOSFODNN7EXAMPLE") + " is the access key", "AKIAIOSFODNN7EXAMPLE is the access key"),
        (_full_width("password=hunter22"), "password=hunter22"),
        ("my key is sk-proj-abcdefgh\u200bijklmnop1234", "my key is sk-proj-abcdefghijklmnop1234"),
        ("pass\u00adword=hunter22", "password=hunter22"),
        ("xoxb-1234\u2060567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
        ("ﾊﾟｽﾜｰﾄﾞはMomiji55です", "パスワードはMomiji55です"),
        ("暗証番号は８４２１です", "暗証番号は8421です"),
        ("пароль: ｑｗｅｒｔｙ７７", "пароль: qwerty77"),
        (_full_width("PASSWORD IS Hunter2"), "password is Hunter2"),
    ],
)
def test_compatibility_forms_are_read_as_their_plain_letters(disguised: str, plain: str) -> None:
    """Full-width forms (an IME's), mathematical letters, and invisible format characters inside a token do
    not hide it: the text is NFKC-normalised, stripped of format characters and casefolded before matching."""
    assert disguised != plain
    assert find_secret(plain) is not None
    assert find_secret(disguised) == find_secret(plain)


@pytest.mark.parametrize(
    "text",
    [
        "The primary key of the orders table is order_id",
        "The key to good bread is a long proof",
        "The user changed the key binding to Ctrl+Space",
        "The shortcut key is Ctrl+K",
        "The error code is E4021 for timeouts",
        "The user runs postgres:15 and redis:7-alpine locally",
        "Meetings start at 10:30 on Mondays",
        "The user's email is Bob.Smith2@Example.com",
        "make deploy REGION=eu-west-3",
        "La contraseña se guarda en el gestor del equipo",
        "La clave del éxito es la constancia",
        "Das Passwort ist im Tresor gespeichert",
        "Der Primärschlüssel ist die Spalte id",
        "Le mot de passe doit contenir 12 caractères",
        "La clé USB est dans le tiroir",
        "A senha é obrigatória no primeiro acesso",
        "La chiave inglese è nel garage",
        "パスワードは12文字以上にしてください",
        "ユーザーはパスワードをBitwardenで管理しています",
        "主キーはuser_idです",
        "密码长度至少是12位",
        "密码是128位的",
        "Пароль должен быть длиннее 12 символов",
        "Первичный ключ — это поле id",
    ],
)
def test_ordinary_text_in_any_language_is_not_taken_for_a_secret(text: str) -> None:
    assert find_secret(text) is None


@pytest.mark.parametrize("size", [1_000, 100_000])
def test_the_filter_reads_long_text_in_linear_time(size: int) -> None:
    """Adversarial repetitions of the vocabulary (names, links, joins, pairs) stay fast."""
    import time

    for unit in ("password for ", "密码是", "the key is the ", "a:b ", "пароль — "):
        text = unit * (size // len(unit))
        started = time.perf_counter()
        find_secret(text)
        assert time.perf_counter() - started < max(2.0, size / 20_000)


def test_empty_and_overlong_text_refused(store: Memories) -> None:
    with pytest.raises(MemoryRefused, match="needs some text"):
        store.add("   \n ", actor="user")
    with pytest.raises(MemoryRefused, match="at most"):
        store.add("word " * 200, actor="user")


def test_export_import_round_trip_as_events(store: Memories) -> None:
    a = store.add("The user prefers tabs", actor="user", kind="preference")
    b = store.add("Run make check first", actor="user", kind="instruction", scope="project", project=PROJECT)
    c = store.add("The user's cat is Tom", actor="user")
    text = memory_file.render(store.list(project=PROJECT), PROJECT)
    assert f"- {b.ref} [project, instruction] Run make check first" in text
    edited = text.replace("prefers tabs", "prefers spaces").replace(
        f"- {c.ref} [user, fact] The user's cat is Tom\n", ""
    )
    edited += "- [user, fact] The user drinks coffee\n- The user lives in Oslo\n"
    result = store.import_entries(memory_file.parse(edited), PROJECT)
    assert (result.added, result.updated, result.deleted) == (2, 1, 1)
    assert store.get(a.id).text == "The user prefers spaces" and store.get(c.id).status == "deleted"
    again = store.import_entries(memory_file.parse(edited), PROJECT)  # id-less lines match what exists
    assert (again.added, again.updated, again.deleted) == (0, 0, 0)
    store.history.undo()  # the whole import is one change
    assert sorted(m.text for m in store.list(project=PROJECT)) == sorted(
        ["The user prefers tabs", "Run make check first", "The user's cat is Tom"]
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("just words\n", "line 1: not a memory line"),
        ("- m1 [user, fact] a\n- m1 [user, fact] b\n", "line 2: m1 appears twice"),
        ("- [team, fact] shared\n", "unknown scope"),
        ("- [user, rumour] gossip\n", "unknown kind"),
        ("- [user, fact] key sk-abcdefghijklmnopqrstuvwx\n", "line 1: not stored"),
    ],
)
def test_bad_memory_files_are_refused_with_the_line(text: str, error: str) -> None:
    with pytest.raises(CoError, match=error):
        memory_file.parse(text)


def test_import_of_unknown_id_changes_nothing(store: Memories) -> None:
    store.add("The user prefers tabs", actor="user")
    with pytest.raises(MemoryRefused, match="m42 is not an active memory"):
        store.import_entries(memory_file.parse("- [user, fact] new one here\n- m42 [user, fact] x\n"), PROJECT)
    assert [m.text for m in store.list()] == ["The user prefers tabs"]


def test_queue_claims_once_and_retries_a_failure_once(store: Memories) -> None:
    queue = ExtractionQueue(store.db)
    queue.put("s1", 0, "I moved to Oslo last year", PROJECT)
    item = queue.claim()
    assert item is not None and queue.claim() is None  # claimed: not handed out twice
    queue.failed(item)
    assert queue.claim() is None  # never retried at once
    with store.db.transaction() as tx:  # RETRY_AFTER seconds later
        tx.execute("UPDATE memory_queue SET claimed_at = claimed_at - ?", (ExtractionQueue.RETRY_AFTER + 1,))
    again = queue.claim()
    assert again is not None and again.attempts == 2
    queue.failed(again)  # the second failure drops it
    assert len(queue) == 0
    queue.put("s1", 2, "another message here", PROJECT)
    stale = queue.claim()
    assert stale is not None
    assert queue.claim(stale_after=-1) is not None  # a claim of a dead co is taken over


def test_interrupted_work_is_handed_back_untried(store: Memories) -> None:
    queue = ExtractionQueue(store.db)
    queue.put("s1", 0, "I moved to Oslo last year", PROJECT)
    item = queue.claim()
    assert item is not None
    queue.release(item)
    again = queue.claim()
    assert again is not None and again.attempts == 1


def test_sessions_recover_keeps_memories_and_their_history(tmp_path: Path) -> None:
    from co_cli.store.recover import recover

    source = tmp_path / "co.db"
    db = Database.open(source)
    store = Memories(db)
    kept = store.add("The user prefers tabs", actor="user", kind="preference", subject=Subject("indent", "user"))
    gone = store.add("The user lives in Paris", actor="user")
    store.forget(gone.ref, actor="user")
    db.close()
    recover(source, tmp_path / "recovered.db")
    db = Database.open(tmp_path / "recovered.db")
    copy = Memories(db)
    assert [(m.id, m.text, m.topic, m.about) for m in copy.list()] == [
        (kept.id, "The user prefers tabs", "indent", "user")
    ]
    assert copy.search(["tabs"], project=None)  # the full-text index is rebuilt
    assert [e.action for e in copy.history.log()] == ["delete", "add", "add"]
    copy.history.undo()
    assert copy.get(gone.id).status == "active"
    db.close()


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("The user likes \x1b]52;c;c2VjcmV0\x07tea", "The user likes tea"),
        ("Clear \x1b[2J\x1b[Hthe screen never", "Clear the screen never"),
        ("C1 \x9b31mred\x9b0m text", "C1 red text"),
        ("Title \x1b]0;pwned\x1b\\ set", "Title set"),
        ("Bell\x07 and back\x08space and DEL\x7f", "Bell and backspace and DEL"),
        ("Tabs\tand\nnew\r\nlines", "Tabs and new lines"),
        ("DCS \x90qpayload\x9c gone", "DCS gone"),
    ],
)
def test_control_sequences_are_not_stored(store: Memories, tmp_path: Path, text: str, kept: str) -> None:
    """On every path a memory is written (add, propose, edit, replace): stored without escape sequences."""
    added = store.add(text, actor="model")
    proposed = store.review.propose(text, proposal="add")
    edited = store.edit(store.add("The user uses vim", actor="user").ref, text)
    assert added.text == proposed.text == edited.text == kept
    raw = sqlite3.connect(tmp_path / "co.db")
    dump = "\n".join(raw.iterdump())
    raw.close()
    assert "\x1b" not in dump and "\x9b" not in dump and "\x07" not in dump
