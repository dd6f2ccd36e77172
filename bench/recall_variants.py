"""The recall bench's conversations: the ledger service's (tests/support/planted_facts.py, ``en``) and two more of
the same shape, written apart from it: ``en-other`` (a bookshop's checkout, other names, values, verbs and
sentences) and ``de`` (a warehouse service, in German). Each plants twelve facts of the same kinds in the same
turns, three of harder kinds after them, and has one question per fact.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.planted_facts import LEDGER, PlantedFact, PlantedScript, ScriptedToolCall, ScriptedTurn


@dataclass(frozen=True)
class Variant:
    script: PlantedScript
    few_words: str
    """Added to each question: answer in a few words (in the conversation's language)."""


TWELVE = ("codename", "region", "port", "config", "error", "decision", "rule", "style", "upgrade", "reviewer", "date",
          "next_step")  # fmt: skip
"""The twelve kinds every variant plants, in the order the ledger conversation plants them."""


def _twelve(facts: dict[str, PlantedFact]) -> tuple[PlantedFact, ...]:
    return tuple(facts[kind] for kind in TWELVE)


def _harder(facts: dict[str, PlantedFact]) -> tuple[PlantedFact, ...]:
    """The three harder kinds: a name the assistant proposed, a value only a tool showed, a value changed later."""
    return (facts["proposed"], facts["tool_only"], facts["changed"])


# ----- en-other: a bookshop's checkout service -----

_SHOP = dict(
    codename=PlantedFact(
        "codename",
        "KINGFISHER-12",
        "Internally this rewrite goes by KINGFISHER-12, and that tag belongs on every release branch.",
        "What does the team call this rewrite internally?",
    ),
    region=PlantedFact(
        "region",
        "ap-southeast-1",
        "The shop's servers sit in ap-southeast-1 since most buyers are in Singapore.",
        "In which cloud region do the shop's servers sit?",
    ),
    port=PlantedFact(
        "port",
        "9321",
        "Inside the cluster the checkout API answers on 9321.",
        "On which port does the checkout API answer inside the cluster?",
    ),
    config=PlantedFact(
        "config path",
        "ops/checkout/live.env",
        "Every knob for the live shop is set in ops/checkout/live.env.",
        "Which file sets the knobs for the live shop?",
    ),
    error=PlantedFact(
        "error code and fix",
        "CK-208",
        "If the logs show CK-208 during checkout, the cart index has drifted, and running manage.py "
        "rebuild_cart_index repairs it.",
        "What does CK-208 in the logs mean, and what repairs it?",
        also=("rebuild_cart_index",),
    ),
    decision=PlantedFact(
        "decision and reason",
        "RabbitMQ",
        "We picked RabbitMQ over Kafka for the order queue, since only two of us run operations and a Kafka "
        "cluster needs more care than that.",
        "Which broker did we pick for the order queue, and for what reason?",
        also=("two of us",),
    ),
    rule=PlantedFact(
        "hard rule",
        "orders-primary",
        "Nobody touches orders-primary by hand outside a change window, ever.",
        "Which database must nobody touch by hand outside a change window?",
    ),
    style=PlantedFact(
        "style preference",
        "pathlib",
        "Please reach for pathlib instead of os.path, and keep functions under forty lines.",
        "How do I like file paths handled in code?",
    ),
    upgrade=PlantedFact(
        "failed upgrade",
        "5.1.2",
        "Moving to Django 5.1.2 on Friday broke the admin's custom filters, so requirements.txt holds it at 5.0.9.",
        "Which Django upgrade went wrong, and which version are we holding at?",
        also=("5.0.9",),
    ),
    reviewer=PlantedFact(
        "reviewer",
        "@haruto-s",
        "Haruto (@haruto-s) signs off on anything that changes how payments flow.",
        "Who has to sign off on changes to the payment flow?",
    ),
    date=PlantedFact(
        "date",
        "October 2",
        "The shop reopens to the public on October 2.",
        "When does the shop reopen to the public?",
    ),
    next_step=PlantedFact(
        "next step",
        "scripts/refund_audit.py",
        "When this is wrapped up, I want scripts/refund_audit.py written to cross-check last quarter's refunds.",
        "What should we do once this is wrapped up?",
    ),
    proposed=PlantedFact(
        "assistant proposal, accepted",
        "cart_holds_v3",
        "How about a cart_holds_v3 table that keeps each reserved item until the payment clears or the hold expires?",
        "What did we call the table for reserved items?",
    ),
    tool_only=PlantedFact(
        "only in a tool output",
        "4719",
        "31:PAYMENT_TIMEOUT_MS=4719",
        "What is the payment timeout in the live settings file, in milliseconds?",
    ),
    changed=PlantedFact(
        "changed later",
        "cache-node-09",
        "Heads up: the session cache lives on cache-node-09 as of today; cache-node-04 is being switched off.",
        "Which host runs the session cache now?",
        stale=("cache-node-04",),
    ),
)

_SHOP_BACKGROUND = (
    "Some background: the checkout takes a basket from the web front end, reserves the stock, charges the card "
    "through the payment provider and mails a receipt; it is a Django project with a handful of Celery workers, "
    "and its tests take roughly a minute on a laptop."
)


def _shop_turns() -> tuple[ScriptedTurn, ...]:
    f = _SHOP
    live_env = (
        "# checkout, live\nDATABASE_URL=postgres://till@db.internal/till\nPAYMENT_PROVIDER_URL=https://pay.example.net/v3\n"
        "PAYMENT_RETRIES=4\n\nMAIL_RELAY=smtp-relay.internal:587\nMAIL_FROM=receipts@shop.example\n\nLOG_LEVEL=info\n"
        "LOG_FORMAT=json\n"
    )
    return (
        ScriptedTurn(
            f"Morning! I'm back on the bookshop's checkout and could use a hand. {f['codename'].statement} "
            f"{f['region'].statement}",
            "Sounds good, I'll keep that in mind. Where do you want to begin?",
            facts=(f["codename"], f["region"]),
        ),
        ScriptedTurn(
            f"{_SHOP_BACKGROUND} {f['port'].statement} TLS stops at the load balancer, which talks plain HTTP to the "
            "pods, and the readiness probe calls /ready every five seconds. " + _SHOP_BACKGROUND,
            "Clear: the load balancer handles TLS and the pods only see plain HTTP. Should the readiness probe "
            "change at all?",
            facts=(f["port"],),
        ),
        ScriptedTurn(
            f"Not for now. {f['config'].statement} Have a look at it so you know what's in there.",
            "The file has three groups: the database, payments and mail. Payments point at the provider's API "
            "with a retry count; mail goes out through an internal relay.",
            tool_calls=(ScriptedToolCall("read_file", {"path": f["config"].key}, live_env),),
            facts=(f["config"],),
        ),
        ScriptedTurn(
            f"A couple of things I learned the hard way. {f['error'].statement} {f['decision'].statement}",
            "Good to know. An index drifting after a partial deploy is common, and a small operations team is a "
            "fair reason to keep the broker simple.",
            facts=(f["error"], f["decision"]),
        ),
        ScriptedTurn(
            f"{f['rule'].statement} {f['style'].statement}",
            "Understood, I'll stick to both.",
            facts=(f["rule"], f["style"]),
        ),  # fmt: skip
        ScriptedTurn(
            f"{f['upgrade'].statement} {f['reviewer'].statement} Could you check which Django is installed right now?",
            "The installed version is the one you are holding at.",
            tool_calls=(
                ScriptedToolCall(
                    "run_shell",
                    {"command": "pip show django"},
                    "exit code: 0\nstdout:\nName: Django\nVersion: 5.0.9\nSummary: A high-level Python web framework "
                    "that encourages rapid development\nLocation: /srv/till/.venv/lib/python3.12/site-packages\n"
                    "stderr: (empty)",
                ),
            ),
            facts=(f["upgrade"], f["reviewer"]),
        ),
        ScriptedTurn(
            f"{f['date'].statement} {_SHOP_BACKGROUND} {f['next_step'].statement}",
            "Got it. Let's get things in order well before then.",
            facts=(f["date"], f["next_step"]),
        ),
        ScriptedTurn(
            "For now the session cache runs on cache-node-04. Where should we keep the items someone has put in "
            "their basket while the payment is pending?",
            f["proposed"].statement,
        ),
        ScriptedTurn(
            "Agreed, go with that. Also find the payment timeout in the live settings; the hold expiry has to "
            "match it.",
            "Found it; the hold expiry will follow that value.",
            tool_calls=(
                ScriptedToolCall(
                    "run_shell",
                    {"command": f"grep -n PAYMENT_TIMEOUT {f['config'].key}"},
                    f"exit code: 0\nstdout:\n{f['tool_only'].statement}\nstderr: (empty)",
                ),
            ),
        ),
    )


SHOP = PlantedScript(
    facts=_twelve(_SHOP),
    harder=_harder(_SHOP),
    planting=_shop_turns(),
    change=ScriptedTurn(_SHOP["changed"].statement, "Thanks, updated."),
    topics=(
        ("How should the checkout retry a card payment that timed out?", "src/till/payments.py"),
        ("What is a sensible way to check a basket before any stock is reserved?", "src/till/basket.py"),
        ("Could you walk me through idempotency keys and whether we need them?", None),
        ("Why does the receipt e-mail test pass on my machine but fail in the pipeline?", "tests/test_receipts.py"),
        ("How would you lay out the order logs so support staff can follow them?", None),
        ("What does the prefetch setting of the workers change in practice?", "src/till/workers.py"),
        ("Is there a quick way to see where the checkout spends its time?", None),
        ("Run the tests and tell me what breaks.", "pytest"),
        ("How do transactions in the Django ORM interact with Celery tasks?", "src/till/orders.py"),
        ("Should refunds be a model of their own or a state of the order?", None),
        ("Where is the API version of the basket checked?", "grep"),
        ("How would you add a --since option to the export command?", "src/till/export.py"),
        ("Would a thread pool help the receipt sender, or is async the better fit?", None),
        ("What happens when two workers reserve the last copy of a book at the same moment?", "src/till/stock.py"),
    ),
    answer_sentences=(
        "It mostly comes down to how often this goes wrong and what one more attempt costs.",
        "Here the logic lives in a single place, which makes it straightforward to cover with tests.",
        "I would start by pulling the behaviour into a small, well-named function.",
        "Keep the main path readable and deal with failures at the boundaries, where you can log what happened.",
        "Say the word and I will draft the change together with its tests.",
        "Be careful with state that leaks between tests; a fresh database per test prevents most of it.",
        "Django already provides most of what is needed, so a new dependency would buy little.",
        "Time it first: a quick measurement will show whether this is worth changing.",
    ),
    again="(Same question, now that a few things have changed.)",
    service="till",
)
"""A bookshop's checkout service, in other words than the ledger's."""


# ----- de: a warehouse service, in German -----

_LAGER = dict(
    codename=PlantedFact(
        "codename",
        "NORDLICHT4",
        "Intern heißt das Vorhaben NORDLICHT4, und genau so sollen auch die Release-Branches heißen.",
        "Wie heißt das Vorhaben intern?",
    ),
    region=PlantedFact(
        "region",
        "eu-north-1",
        "Unsere Server laufen in eu-north-1, weil der Kunde in Schweden sitzt.",
        "In welcher Region laufen unsere Server?",
    ),
    port=PlantedFact(
        "port",
        "7081",
        "Der Lagerdienst lauscht hinter dem Proxy auf Port 7081.",
        "Auf welchem Port lauscht der Lagerdienst?",
    ),
    config=PlantedFact(
        "config path",
        "betrieb/lager/einstellungen.prod.ini",
        "Sämtliche Einstellungen für den Betrieb stehen in betrieb/lager/einstellungen.prod.ini.",
        "In welcher Datei stehen die Einstellungen für den Betrieb?",
    ),
    error=PlantedFact(
        "error code and fix",
        "LG-3150",
        "Meldet der Dienst beim Start LG-3150, ist die PID-Datei verwaist; dann /run/lager.pid löschen und neu "
        "starten.",
        "Was bedeutet LG-3150 beim Start, und was hilft dagegen?",
        also=("/run/lager.pid",),
    ),
    decision=PlantedFact(
        "decision and reason",
        "DuckDB",
        "Für die Auswertungen nehmen wir DuckDB statt MySQL, weil die Abfragen über ganze Jahre laufen und "
        "spaltenweise viel schneller sind.",
        "Welche Datenbank nehmen wir für die Auswertungen, und warum?",
        also=("spaltenweise",),
    ),
    rule=PlantedFact(
        "hard rule",
        "lager-db-prod",
        "Auf lager-db-prod wird ohne Ticket nichts von Hand geändert, nie.",
        "Welche Regel gilt für Änderungen von Hand an der Datenbank?",
    ),
    style=PlantedFact(
        "style preference",
        "dataclasses",
        "Mir sind dataclasses lieber als lose Dictionaries, und jede öffentliche Funktion bekommt einen Docstring.",
        "Was ist mir bei Datenstrukturen im Code lieber?",
    ),
    upgrade=PlantedFact(
        "failed upgrade",
        "0.115.0",
        "Mit FastAPI 0.115.0 sind letzte Woche die Abhängigkeiten der Endpunkte kaputtgegangen, deshalb ist die "
        "Version auf 0.110.3 festgeschrieben.",
        "Welches Update ist schiefgegangen, und auf welche Version sind wir festgelegt?",
        also=("0.110.3",),
    ),
    reviewer=PlantedFact(
        "reviewer",
        "@becker-j",
        "Jeder Merge Request braucht die Freigabe von @becker-j.",
        "Wer muss Merge Requests freigeben?",
    ),
    date=PlantedFact(
        "date",
        "22. Mai",
        "Die Abnahme beim Kunden ist am 22. Mai.",
        "Wann ist die Abnahme beim Kunden?",
    ),
    next_step=PlantedFact(
        "next step",
        "scripts/bestand_abgleich.py",
        "Wenn wir hier fertig sind, kommt scripts/bestand_abgleich.py dran, das die Bestände mit dem ERP abgleicht.",
        "Was ist der nächste Schritt?",
    ),
    proposed=PlantedFact(
        "assistant proposal, accepted",
        "reservierung_puffer_v2",
        "Ich würde eine eigene Tabelle reservierung_puffer_v2 anlegen: eine Zeile je offener Reservierung, "
        "gelöscht, sobald das ERP sie bestätigt.",
        "Wie heißt die Tabelle für offene Reservierungen, auf die wir uns geeinigt haben?",
    ),
    tool_only=PlantedFact(
        "only in a tool output",
        "6280",
        "18:sperr_timeout_ms = 6280",
        "Wie lang ist das Sperr-Timeout in den Produktionseinstellungen, in Millisekunden?",
    ),
    changed=PlantedFact(
        "changed later",
        "test-db-07",
        "Korrektur: die Testdatenbank ist heute früh auf test-db-07 umgezogen, test-db-03 wird abgeschaltet.",
        "Auf welchem Host liegt die Testdatenbank jetzt?",
        stale=("test-db-03",),
    ),
)

_LAGER_BACKGROUND = (
    "Zum Hintergrund: der Dienst nimmt Buchungen der Handscanner entgegen, prüft sie, schreibt sie in die lokale "
    "Datenbank und meldet sie ans ERP, sobald eine Verbindung steht; fast alles ist schlichtes Python mit FastAPI, "
    "und die Tests brauchen auf einem Laptop etwa eine halbe Minute."
)


def _lager_turns() -> tuple[ScriptedTurn, ...]:
    f = _LAGER
    ini = (
        "[datenbank]\npfad = /var/lib/lager/bestand.db\njournal = wal\n\n"
        "[erp]\nstapelgroesse = 200\nmax_wiederholungen = 6\nadresse = https://erp.intern.example/schnittstelle/v1\n\n"
        "[protokoll]\nstufe = info\nformat = json\n"
    )
    return (
        ScriptedTurn(
            f"Hallo! Ich arbeite wieder am Lagerdienst und hätte gern deine Hilfe. {f['codename'].statement} "
            f"{f['region'].statement}",
            "Alles klar, das behalte ich im Kopf. Womit fangen wir an?",
            facts=(f["codename"], f["region"]),
        ),
        ScriptedTurn(
            f"{_LAGER_BACKGROUND} {f['port'].statement} Der Proxy beendet TLS und reicht einfaches HTTP an den Dienst "
            "weiter; der Healthcheck fragt alle fünfzehn Sekunden /gesund ab. " + _LAGER_BACKGROUND,
            "Verstanden: TLS endet am Proxy, der Dienst bekommt einfaches HTTP. Soll sich am Healthcheck etwas ändern?",
            facts=(f["port"],),
        ),
        ScriptedTurn(
            f"Erst mal nicht. {f['config'].statement} Lies sie bitte, damit du den Aufbau kennst.",
            "Die Datei hat drei Abschnitte: Datenbank, ERP-Anbindung und Protokoll. Die ERP-Anbindung schickt "
            "Stapel von 200 Buchungen und hat eine Obergrenze für Wiederholungen.",
            tool_calls=(ScriptedToolCall("read_file", {"path": f["config"].key}, ini),),
            facts=(f["config"],),
        ),
        ScriptedTurn(
            f"Noch zwei Dinge aus der letzten Woche. {f['error'].statement} {f['decision'].statement}",
            "Danke, das hilft. Eine verwaiste Datei nach einem Absturz ist ein Klassiker, und für lange Auswertungen "
            "passt eine spaltenorientierte Datenbank gut.",
            facts=(f["error"], f["decision"]),
        ),
        ScriptedTurn(
            f"{f['rule'].statement} {f['style'].statement}",
            "Notiert, ich halte mich an beides.",
            facts=(f["rule"], f["style"]),
        ),  # fmt: skip
        ScriptedTurn(
            f"{f['upgrade'].statement} {f['reviewer'].statement} Kannst du nachsehen, welche Version installiert ist?",
            "Installiert ist genau die festgeschriebene Version.",
            tool_calls=(
                ScriptedToolCall(
                    "run_shell",
                    {"command": "pip show fastapi"},
                    "exit code: 0\nstdout:\nName: fastapi\nVersion: 0.110.3\nSummary: FastAPI framework, high "
                    "performance, easy to learn\nLocation: /opt/lager/.venv/lib/python3.12/site-packages\n"
                    "stderr: (empty)",
                ),
            ),
            facts=(f["upgrade"], f["reviewer"]),
        ),
        ScriptedTurn(
            f"{f['date'].statement} {_LAGER_BACKGROUND} {f['next_step'].statement}",
            "Verstanden. Dann sorgen wir dafür, dass bis dahin alles rund läuft.",
            facts=(f["date"], f["next_step"]),
        ),
        ScriptedTurn(
            "Die Testdatenbank liegt im Moment auf test-db-03. Wo sollen Reservierungen warten, bis das ERP sie "
            "bestätigt hat?",
            f["proposed"].statement,
        ),
        ScriptedTurn(
            "Ja, so machen wir das. Such bitte auch das Sperr-Timeout in den Produktionseinstellungen heraus; den "
            "Wert brauchen wir für die Wiederholungen.",
            "Gefunden; diesen Wert nehme ich für den Entwurf der Wiederholungen.",
            tool_calls=(
                ScriptedToolCall(
                    "run_shell",
                    {"command": f"grep -n sperr_timeout {f['config'].key}"},
                    f"exit code: 0\nstdout:\n{f['tool_only'].statement}\nstderr: (empty)",
                ),
            ),
        ),
    )


LAGER = PlantedScript(
    facts=_twelve(_LAGER),
    harder=_harder(_LAGER),
    planting=_lager_turns(),
    change=ScriptedTurn(_LAGER["changed"].statement, "Danke, ist notiert."),
    topics=(
        ("Nach welcher Regel wiederholt die ERP-Anbindung einen Stapel, der nicht durchging?", "src/lager/erp.py"),
        ("Wie prüfe ich eine eingehende Buchung, bevor sie gespeichert wird?", "src/lager/buchungen.py"),
        ("Lohnt sich hier exponentielles Backoff, und wie funktioniert das überhaupt?", None),
        ("Warum scheitert der Datenbanktest ab und zu in der CI, lokal aber nie?", "tests/test_datenbank.py"),
        ("Wie baue ich die Protokolle so auf, dass das Lagerteam damit zurechtkommt?", None),
        ("Was bewirkt die Stapelgröße genau?", "src/lager/erp.py"),
        ("Wie finde ich am einfachsten heraus, wo eine Buchung ihre Zeit verbringt?", None),
        ("Lass die Tests laufen und sag mir, was rot wird.", "pytest"),
        ("Wozu sind Kontextmanager bei der Datenbankverbindung gut?", "src/lager/datenbank.py"),
        ("Sollten Buchungen pydantic-Modelle sein oder schlichte Klassen?", None),
        ("An welcher Stelle wird die Schemaversion einer Buchung geprüft?", "grep"),
        ("Wie bekäme die Kommandozeile eine Option --probelauf?", "src/lager/cli.py"),
        ("Threads oder asyncio für die ERP-Anbindung, was passt besser?", None),
        ("Was passiert, wenn zwei Prozesse zugleich in die Datenbank schreiben?", "src/lager/datenbank.py"),
    ),
    answer_sentences=(
        "Das lässt sich nicht pauschal sagen; entscheidend ist, wie teuer ein Fehler an dieser Stelle wird.",
        "Der betreffende Code ist überschaubar und hängt an keiner anderen Stelle des Dienstes.",
        "Ich würde mit einem kleinen Test beginnen, der das heutige Verhalten festhält.",
        "Fehlermeldungen sollten sagen, welche Buchung betroffen ist, sonst sucht das Lagerteam lange.",
        "Gern schreibe ich dir einen Entwurf, den du dann in Ruhe durchsehen kannst.",
        "In der CI laufen die Tests parallel, lokal meist nacheinander; das erklärt vieles.",
        "Mit FastAPI und der Standardbibliothek kommst du hier ohne weiteres Paket aus.",
        "Bevor wir umbauen, lohnt ein Blick auf echte Zahlen aus dem Betrieb.",
    ),
    again="(Ich frage noch einmal, mit dem neuesten Stand im Kopf.)",
    service="lager",
)
"""A warehouse service's conversation, in German."""


VARIANTS = {
    "en": Variant(LEDGER, "Answer in a few words."),
    "en-other": Variant(SHOP, "Keep the answer short."),
    "de": Variant(LAGER, "Antworte in wenigen Worten."),
}
