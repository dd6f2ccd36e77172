"""Credentials: text that looks like a secret never becomes a memory, and a URL's credentials are masked
whenever it is shown.

Every path that stores a memory (the CLI, the agent's tool, the extractor, import) calls ``find_secret``
first; the refusal names the kind of credential and never quotes it. The filter errs toward refusing: it matches
the text NFKC-normalised (a full-width "ｇｈｐ＿…" is a GitHub token) and reads secrets said in prose in the
languages of ``SECRET_VOCABULARY`` ("the root pw for prod is …", "la clave del wifi es …", "пароль — …").
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


@functools.cache
def _patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The credential patterns, compiled on first use (``co --help`` and the listings never need them)."""
    return (
        ("a private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----")),
        ("an API key (sk-...)", re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_\-]{16,}")),
        ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b")),
        ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
        ("a GitLab token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
        ("a Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}")),
        ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
        ("a Stripe key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}")),
        ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
        (
            "a password in a URL",
            re.compile(r"(?<![a-z0-9+.\-])[a-z][a-z0-9+.\-]*://[^/\s:@]+:[^/\s@]+@", re.IGNORECASE),
        ),
        (
            "a webhook URL",
            re.compile(
                r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_\-]{8,}"
                r"|discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{8,}"
                r"|\.webhook\.office\.com/\S{16,}",
                re.IGNORECASE,
            ),
        ),
        (
            "an authorization header",
            re.compile(
                r"\b(?:authorization\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?|bearer\s+|basic\s+)"
                r"(?=[A-Za-z._~+/\-]*\d)[A-Za-z0-9._~+/\-]{12,}",
                re.IGNORECASE,
            ),
        ),
        (
            "a Hugging Face, npm or PyPI token",
            re.compile(r"\b(?:hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_\-]{40,})"),
        ),
        ("a SendGrid key", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}")),
    )


_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.\-])[\"']?(?P<name>[A-Za-z0-9_.\-]+)[\"']?\s*(?P<sep>=>|=|:)\s*(?P<quote>[\"']?)"
    r"(?P<value>[^\s\"',;]{3,})"
)
"""Any ``name = value`` (the name is checked apart: one pattern that did both would backtrack quadratically)."""
_SECRET_NAME = re.compile(
    r"password|passwd|passphrase"  # DB_PASSWORD, PGPASSWORD, db.password
    r"|(?:^|[_.\-])(?:secret|token|pwd|pass|auth|credentials?|apikey"
    r"|(?:api|access|secret|private|account|master|signing|encryption|client|auth|app|shared)[_.\-]?key)(?:$|[_.\-])",
    re.IGNORECASE,
)
"""A name that says it holds a credential: GITHUB_TOKEN, MYSQL_PWD, access_token, client_secret, AccountKey,
api-key (not max_tokens, TOKENIZERS_PARALLELISM or bypass)."""


def secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a credential (``GITHUB_TOKEN``, ``PGPASSWORD``, ``client_secret``)."""
    return bool(_SECRET_NAME.search(name))


_PLACEHOLDER = re.compile(
    r"^(?:\$|<|\{|%|\*{3}|x{3,}$|\.{3}|…)|^(?:none|null|nil|true|false|yes|no|required|optional|unset|empty|redacted)$",
    re.IGNORECASE,
)


def _assignment(text: str) -> bool:
    """A credential assignment whose value is not a placeholder (``$VAR``, ``<your key>``, ``${{ secrets.X }}``).
    After a bare ``:`` (prose: "auth: uses SSO") the value must look generated: a digit or a symbol in it, or
    16+ characters."""
    for match in _ASSIGNMENT.finditer(text):
        if not _SECRET_NAME.search(match.group("name")):
            continue
        value = match.group("value")
        if _PLACEHOLDER.search(value):
            continue
        if match.group("sep") == ":" and not match.group("quote") and value.isalpha() and len(value) < 16:
            continue
        return True
    return False


# ----- secrets said in words, in several languages -------------------------------------------------------


@dataclass(frozen=True)
class SecretWords:
    """How one language names a secret and gives its value. Each field is a comma-separated list, written
    lower-case (casefolded) and in NFKC form, as the text it is matched against."""

    credentials: str
    """Words and phrases that always name a credential: "password", "mot de passe", "密码"."""
    numeric: str = ""
    """Names of a number code (a PIN): their value must hold three digits."""
    ambiguous: str = ""
    """Words that name a credential only with a qualifier ("wifi key") or a value that looks generated ("the key
    is x7Q2…"): "key", "clave", "ключ" (also a door key, a primary key, the key to success)."""
    accounts: str = ""
    """Words that make a ``name:password`` pair in the same text a login: "login", "usuario", "логин"."""
    qualifiers: str = ""
    """Words next to an ambiguous word that make it a credential: "wifi", "root", "admin"."""
    not_qualifiers: str = ""
    """Words next to an ambiguous word that make it something else: "primary", "usb", "主"."""
    joins: str = ""
    """Words that start a phrase between the name and its link: "for" ("the password for prod is …")."""
    links: str = ""
    """Words between the name (or that phrase) and the value: "is", "lautet", "c'est", "は", "是"."""
    fillers: str = ""
    """Words that may come between the link and the value: "now", "jetzt"."""
    change_verbs: str = ""
    """Stems of the verbs of "changed my password to …": "chang", "geänder", "смен"."""
    to: str = ""
    """The word before the new value in that sentence: "to", "auf", "на"."""
    not_values: str = ""
    """Words that end a sentence about a secret without being one: "stored", "gespeichert", "obligatoire"."""
    glued: bool = False
    """Whether the names also end compound words ("Datenbankpasswort", "WLAN-Schlüssel", "wifi密码")."""


_SHARED_QUALIFIERS = "wifi, wi-fi, wlan, root, admin, sudo, ssh, gpg, pgp, api, vpn, prod, dev, staging, db, smtp, imap"

SECRET_VOCABULARY: dict[str, SecretWords] = {
    "en": SecretWords(
        credentials="password, passwords, passwd, pwd, pw, passphrase, passcode, pass code, secret, credentials, "
        "creds, token, login password, master password, door code, gate code, alarm code, access code, security code, "
        "lock code, safe code, entry code, unlock code, garage code, recovery code, recovery codes, backup codes",
        numeric="pin, pin code, pin number",
        ambiguous="key",
        accounts="login, logins, credentials, creds, account, username, user name, sign-in, sign in",
        qualifiers="network, router, access, secret, private, account, login, master, license, licence, product, "
        "encryption, signing, deploy, server, database, email, mail, bank, door, alarm, safe, production, "
        "administrator, recovery, backup, client, app, wireless",
        not_qualifiers="primary, foreign, sort, partition, composite, unique, cache, dict, dictionary, lookup, map, "
        "hash, hot, shortcut, keyboard, music, musical, main, index, house, car, room, binding, bindings, "
        "combination, signature, change, insight, point, idea, takeaway, question, difference, factor",
        joins="for, of, on, to, at, used, needed, required, that, which, in, from",
        links="is, are, was, were, equals, is set to, reads",
        fillers="now, still, currently, just, actually, simply, it's, it is",
        change_verbs="set, chang, reset, updat, rotat",
        to="to",
        not_values="""a, an, the, my, your, our, their, his, her, its, this, that, these, those, what, which, where,
        how, and, or, but, so, for, from, to, of, with, by, in, on, at, as, is, was, be, been, being, not, never,
        no, now, still, also, just, only, always, usually, same, different, required, optional, needed, set,
        stored, saved, kept, managed, handled, rotated, changed, reset, updated, expired, wrong, correct, missing,
        empty, unknown, long, short, strong, weak, secure, safe, valid, invalid, secret, private, hidden,
        encrypted, hashed, generated, shared, given, sent, used, available, unset, none, null, redacted, here,
        there, too, very, somewhere, elsewhere, inside, written, typed, listed, mentioned, provided, supplied,
        configured, ok, okay, fine, out, important, simple, easy, hard, obvious, known, personal, under, behind,
        taped, printed, on, off, case-sensitive, mandatory, compromised, leaked, lost, forgotten, access, log, login,
        open, unlock, get, enter, reach, use, sign, connect, dropped, removed, deleted, ignored, masked, filtered,
        refused, rejected, blocked, skipped, excluded, omitted, cleared, replaced, logged, shown, printed, displayed,
        checked, verified, validated, reused, recycled, stolen, exposed, revoked, disabled, enabled, locked,
        unlocked, protected, salted, sent, needed, asked, prompted, requested, entered, pasted, copied, synced,
        shared, stored, kept, encoded, same, different, one, two, three, four, five, six, seven, eight, nine, ten""",
    ),
    "es": SecretWords(
        credentials="contraseña, contraseñas, contrasena, credenciales, clave de acceso, palabra clave, token, "
        "código de acceso, código de la puerta, código de seguridad, código de la alarma, frase de contraseña",
        numeric="pin, código pin, nip",
        ambiguous="clave, llave, secreto",
        accounts="usuario, cuenta, credenciales, acceso, login",
        qualifiers="red, servidor, correo, banco, acceso, administrador, producción, router, enrutador",
        not_qualifiers="primaria, foránea, externa, única, del éxito, de la casa, del coche",
        joins="de, del, de la, para, en, que",
        links="es, son, era, eran, sea, será",
        fillers="ahora, todavía, aún, actualmente",
        change_verbs="cambi, puse, puesto, establec, actualic, actualiz, restablec",
        to="a, en, por",
        not_values="""la, el, los, las, un, una, mi, tu, su, sus, nuestra, en, de, del, que, muy, demasiado,
        segura, seguro, obligatoria, obligatorio, necesaria, necesario, incorrecta, incorrecto, correcta, correcto,
        larga, largo, corta, corto, fuerte, débil, nueva, nuevo, guardada, guardado, secreta, secreto, válida,
        inválida, caducada, caducado, diferente, igual, cambiada, privada, privado, requerida, requerido, otra,
        otro, distinta, misma, mismo, esta, esa, importante, conocida, desconocida, no, sí, vacía, personal,
        sencilla, simple, difícil, fácil""",
    ),
    "de": SecretWords(
        credentials="passwort, passworts, passwörter, kennwort, kennworts, kennwörter, zugangsdaten, anmeldedaten, "
        "token, passphrase, zugangscode, türcode, torcode, alarmcode, sicherheitscode, tresorcode",
        numeric="pin, pin-code, pincode, geheimzahl",
        ambiguous="schlüssel, schlüssels, geheimnis",
        accounts="benutzer, benutzername, nutzer, konto, login, zugang, zugangsdaten, anmeldedaten",
        qualifiers="netzwerk, server, datenbank, router, konto, bank, e-mail, mail, zugangs, produktions, "
        "administrator, api-, wlan-, lizenz, produkt",
        not_qualifiers="primär, fremd, haus, wohnungs, auto, sortier, tasten, erfolgs, zimmer",
        joins="für, von, vom, zum, zur, des, der, am, im, bei",
        links="ist, sind, war, lautet, lauten, heisst",
        fillers="jetzt, nun, noch, weiterhin, aktuell, immer noch",
        change_verbs="geänder, geaender, änder, aender, gesetzt, setz, zurückgesetzt",
        to="auf, zu, in",
        glued=True,
        not_values="""der, die, das, ein, eine, mein, meine, dein, deine, sein, seine, ihr, unser, im, in, zu, sehr,
        sicher, geheim, falsch, richtig, lang, kurz, stark, schwach, neu, abgelaufen, gespeichert, hinterlegt,
        erforderlich, notwendig, nötig, gültig, ungültig, geändert, privat, anders, gleich, noch, nicht, auch,
        immer, leer, bekannt, unbekannt, vertraulich, identisch, dasselbe, derselbe, korrekt, veraltet, wichtig,
        nur, irgendwo, dort, hier, unter, auf, hinter, verschlüsselt, vergessen""",
    ),
    "fr": SecretWords(
        credentials="mot de passe, mots de passe, mdp, identifiants, phrase secrète, phrase de passe, jeton, "
        "code secret, code d'accès, digicode, code de la porte, code de sécurité, code de l'alarme",
        numeric="pin, code pin, nip",
        ambiguous="clé, cle, clef, secret",
        accounts="identifiant, identifiants, compte, utilisateur, login",
        qualifiers="réseau, serveur, routeur, banque, compte, messagerie, administrateur, production, accès, "
        "licence, produit, chiffrement",
        not_qualifiers="primaire, étrangère, unique, usb, de voiture, de la maison, du succès, de la réussite",
        joins="de, du, des, pour, sur, à, au, d'",
        links="est, sont, était, c'est, reste",
        fillers="maintenant, toujours, désormais, actuellement, encore",
        change_verbs="chang, modifi, mis, défini, defini, réinitialis",
        to="en, à, pour",
        not_values="""le, la, les, un, une, mon, ma, mes, ton, ta, son, sa, notre, votre, dans, de, du, des, en, sur,
        à, trop, très, sécurisé, sécurisée, secret, secrète, faux, fausse, correct, correcte, long, longue, court,
        courte, fort, forte, faible, nouveau, nouvelle, expiré, expirée, enregistré, enregistrée, stocké, stockée,
        obligatoire, nécessaire, requis, requise, valide, invalide, changé, changée, modifié, modifiée, privé,
        privée, différent, différente, identique, pas, toujours, aussi, encore, vide, inconnu, inconnue,
        confidentiel, confidentielle, personnel, personnelle, ici, là, quelque, chiffré, chiffrée, oublié, perdu""",
    ),
    "pt": SecretWords(
        credentials="senha, senhas, palavra-passe, palavra passe, credenciais, token, código de acesso, "
        "código da porta, código de segurança, frase secreta",
        numeric="pin, código pin",
        ambiguous="chave, segredo",
        accounts="usuário, utilizador, conta, login, credenciais",
        qualifiers="rede, servidor, roteador, banco, conta, email, administrador, produção, acesso, licença",
        not_qualifiers="primária, estrangeira, única, de casa, do carro, do sucesso",
        joins="de, do, da, dos, das, para, no, na",
        links="é, são, era, eram, seja, fica",
        fillers="agora, ainda, atualmente",
        change_verbs="mud, alter, troq, defini, redefini",
        to="para, em",
        not_values="""o, a, os, as, um, uma, meu, minha, seu, sua, nosso, nossa, no, na, em, de, do, da, muito,
        segura, seguro, secreta, secreto, errada, errado, correta, correto, longa, longo, curta, curto, forte,
        fraca, fraco, nova, novo, expirada, expirado, salva, salvo, guardada, guardado, armazenada, armazenado,
        obrigatória, obrigatório, necessária, necessário, válida, inválida, alterada, alterado, privada, privado,
        diferente, igual, não, sempre, também, ainda, vazia, desconhecida, pessoal, confidencial""",
    ),
    "it": SecretWords(
        credentials="password, parola d'ordine, credenziali, token, passphrase, codice di accesso, "
        "codice della porta, codice di sicurezza, codice dell'allarme",
        numeric="pin, codice pin",
        ambiguous="chiave, segreto",
        accounts="utente, account, login, credenziali, nome utente",
        qualifiers="rete, server, router, banca, conto, email, amministratore, produzione, accesso, licenza",
        not_qualifiers="primaria, esterna, unica, usb, inglese, di casa, della macchina, del successo",
        joins="di, del, della, dello, dell', per, nel, nella, sul",
        links="è, sono, era, erano, sia, resta",
        fillers="ora, adesso, ancora, attualmente",
        change_verbs="cambi, modific, impost, reimpost",
        to="in, a, con",
        not_values="""il, lo, la, i, gli, le, un, uno, una, mio, mia, tuo, tua, suo, sua, nostro, nostra, nel,
        nella, in, di, del, della, molto, troppo, sicura, sicuro, segreta, segreto, sbagliata, sbagliato, corretta,
        corretto, lunga, lungo, corta, corto, forte, debole, nuova, nuovo, scaduta, scaduto, salvata, salvato,
        memorizzata, obbligatoria, obbligatorio, necessaria, necessario, richiesta, richiesto, valida, valido, non,
        cambiata, cambiato, privata, privato, diversa, diverso, uguale, sempre, anche, ancora, vuota, sconosciuta,
        personale, riservata, cifrata""",
    ),
    "ja": SecretWords(
        credentials="パスワード, パスフレーズ, 合言葉, あいことば, 認証情報, 資格情報, トークン, シークレット, 秘密鍵, "
        "暗号キー, 解除コード",
        numeric="暗証番号, pin, pinコード, ピン番号",
        ambiguous="鍵, キー, 秘密",
        accounts="ログイン, アカウント, ユーザー, ユーザ, ユーザー名, 認証情報",
        qualifiers="無線lan, 本番, サーバー, サーバ, ルーター, 管理者, 銀行, api, データベース",
        not_qualifiers="主, 外部, 家の, 車の, 成功の, ショートカット",
        links="は, が, って, とは, を",
        glued=True,
    ),
    "zh": SecretWords(
        credentials="密码, 密碼, 口令, 令牌, 凭据, 憑據, 凭证, 憑證, 密钥, 密鑰, 秘钥, 登录密码",
        numeric="pin码, pin",
        ambiguous="钥匙, 鑰匙, 秘密",
        accounts="账号, 帳號, 账户, 帳戶, 用户名, 登录, 凭据",
        qualifiers="无线, 無線, 管理员, 生产, 服务器, 伺服器, 路由器, 数据库, 銀行, 银行, 邮箱, api",
        not_qualifiers="主, 外, 家, 车, 成功的",
        links="是, 为, 為, 就是, 改成, 改为, 改為, 设为, 設為, 设置为, 设置成, 换成",
        glued=True,
    ),
    "ru": SecretWords(
        credentials="пароль, пароля, паролю, паролем, пароле, пароли, паролей, учётные данные, учетные данные, "
        "токен, токена, кодовое слово, код доступа, код от двери, код домофона, код от сейфа, код сигнализации",
        numeric="пин, пин-код, пинкод, pin",
        ambiguous="ключ, ключа, ключом, секрет",
        accounts="логин, учётка, учетка, аккаунт, учётная запись, учетная запись, пользователь",
        qualifiers="вайфай, сети, сеть, админ, админа, прод, прода, сервера, сервер, роутера, роутер, банка, "
        "почты, почта, базы, доступа, лицензии",
        not_qualifiers="первичный, внешний, гаечный, от квартиры, от машины, к успеху, от дома",
        joins="от, для, к, на, у",
        links="это, был, была, будет",
        fillers="теперь, сейчас, всё ещё, все еще, по-прежнему",
        change_verbs="смен, помен, измен, установ, постав, сброс",
        to="на",
        not_values="""в, на, от, для, не, мой, моя, наш, наша, очень, слишком, надёжный, надежный, сложный, простой,
        секретный, неверный, неправильный, правильный, длинный, короткий, сильный, слабый, новый, старый,
        обязателен, обязательный, обязательное, нужен, хранится, сохранён, сохранен, тот, такой, же, другой,
        пустой, один, личный, где-то, здесь, там""",
    ),
}
"""The words of secrets said in prose, by language: which words name a credential, which words link the name
to its value, and which words after it are not a value. Every language's words are matched in every text (a
sentence may mix them)."""

_SYMBOL_LINKS = (":", "=", "==", "=>", "->", "—", "–", " - ", "：")
_QUOTES = "\"'`“”‘’„«»「」『』‹›"
_GENERATED_SYMBOLS = set("!#$%&*+=?@^~|")


def _split(text: str) -> list[str]:
    return [w.strip() for w in text.split(",") if w.strip()]


def _is_cjk(word: str) -> bool:
    return any("\u3040" <= c <= "\u30ff" or "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff" for c in word)


def _alternation(words: set[str] | list[str]) -> str:
    """One regex alternation of ``words`` (longest first, spaces matching any whitespace)."""
    ordered = sorted(set(words), key=len, reverse=True)
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in ordered)


@dataclass(frozen=True)
class _Prose:
    """The vocabulary compiled."""

    names: re.Pattern[str]
    kinds: dict[str, str]
    glued: frozenset[str]
    after: re.Pattern[str]
    direct: re.Pattern[str]
    change: re.Pattern[str]
    change_verbs: re.Pattern[str]
    accounts: re.Pattern[str]
    qualifiers: frozenset[str]
    not_qualifiers: frozenset[str]
    not_values: frozenset[str]


@functools.cache
def _prose() -> _Prose:
    """The vocabulary as patterns, compiled on first use."""
    languages = SECRET_VOCABULARY.values()
    kinds: dict[str, str] = {}
    for kind in ("ambiguous", "numeric", "credentials"):  # a word strong in one language is strong everywhere
        for language in languages:
            kinds.update((word, kind) for word in _split(getattr(language, kind)))
    glued = frozenset(
        word
        for language in languages
        if language.glued
        for field in ("credentials", "numeric", "ambiguous")
        for word in _split(getattr(language, field))
    )

    def every(field: str) -> list[str]:
        return [w for language in languages for w in _split(getattr(language, field))]

    qualifiers = every("qualifiers") + _split(_SHARED_QUALIFIERS)
    word_links = [w for w in every("links") if not _is_cjk(w)]
    cjk_links = [w for w in every("links") if _is_cjk(w)]
    joins = every("joins")
    spaced_joins = [j for j in joins if not j.endswith("'")]
    glued_joins = [j for j in joins if j.endswith("'")]
    token = r"[^\s:=：,;.!?。，]+"
    quote = f"[{re.escape(_QUOTES)}]"
    value = rf"(?P<quote>{quote})?(?P<value>[^\s{re.escape(_QUOTES)},;，。、]+)(?P<rest>\s*\S?)"
    after = (
        rf"(?P<between>(?:\s+(?:{_alternation(qualifiers)})(?!\w))*"
        rf"(?:\s*,?\s*(?:\s(?:{_alternation(spaced_joins)})\s+|\s(?:{_alternation(glued_joins)})\s*)"
        rf"{token}(?:\s+{token}){{0,4}}?)?)"
        rf"(?P<link>\s*,?\s+(?:{_alternation(word_links)})(?!\w)"
        rf"|\s*(?:{_alternation(list(_SYMBOL_LINKS))}|{_alternation(cjk_links)}))"
        rf"\s*(?:(?:{_alternation(every('fillers'))})\s+)*{value}"
    )
    change = rf"(?:\s+\S+){{0,2}}?\s+(?:{_alternation(every('to'))})\s+{value}"
    return _Prose(
        names=re.compile(_alternation(list(kinds))),
        kinds=kinds,
        glued=glued,
        after=re.compile(after),
        direct=re.compile(rf"(?:\s*[(（]\s*|\s+){value}"),
        change=re.compile(change),
        change_verbs=re.compile(rf"(?<!\w)(?:{_alternation(every('change_verbs'))})"),
        accounts=re.compile(
            rf"(?<!\w)(?:{_alternation([w for w in every('accounts') + every('credentials') if not _is_cjk(w)])})(?!\w)"
            rf"|{_alternation([w for w in every('accounts') + every('credentials') if _is_cjk(w)])}"
        ),
        qualifiers=frozenset(qualifiers),
        not_qualifiers=frozenset(every("not_qualifiers")),
        not_values=frozenset(w for language in languages for w in _split(language.not_values.replace("\n", " "))),
    )


def _normalized(text: str) -> str:
    """``text`` as it is matched: NFKC (full-width and other compatibility forms become the plain letters, digits
    and symbols: "ｇｈｐ＿…" is "ghp_…"), without invisible format characters (zero-width spaces, soft hyphens,
    bidi marks) that would split a token, and with typographic apostrophes plain."""
    normal = unicodedata.normalize("NFKC", text)
    if not normal.isascii():
        normal = "".join(c for c in normal if unicodedata.category(c) != "Cf").replace("’", "'")
    return normal


def _generated(value: str) -> bool:
    """A value that looks made up rather than a word: letters and digits, or symbols."""
    has_digit = any(c.isdigit() for c in value)
    has_letter = any(c.isalpha() for c in value)
    return (has_digit and has_letter) or any(c in _GENERATED_SYMBOLS for c in value)


_ASCII_RUN = re.compile(r"[!-~]+")
_NEAR_NUMBER = re.compile(r"(?:\s+[^\s\d.,;:!?]+){1,2}\s+\d{4,12}(?![\w.,:/]\w)")
"""A number of four or more digits a word or two after the name of a PIN ("пин-код карты 5521")."""
_COUNTER_FREE = set("でだと。、，")
"""What may follow a number given as a value in Japanese or Chinese ("1234です"); any other character makes it
a count ("12文字", "128位")."""


def _given(prose: _Prose, kind: str, found: re.Match[str], cjk: bool, qualified: bool, *, direct: bool = False) -> bool:
    """Whether the value ``found`` holds (after a name of ``kind``) is a secret rather than a word of the
    sentence. ``direct``: the value follows the name with no word between ("wifi password Sunflower77"), so it
    must look generated (a PIN: be a number)."""
    value, quote, rest = found.group("value"), found.group("quote"), found.group("rest")
    link = found.groupdict().get("link") or ""
    if cjk or _is_cjk(link):
        run = _ASCII_RUN.match(value)
        if run is None:
            return False  # a value in Chinese or Japanese words: "密码是必需的"
        tail = value[run.end() :]
        value = run.group()
        if value.isdigit() and tail and tail[0] not in _COUNTER_FREE:
            return False
        if link.strip() == "を" and not tail.startswith("に"):
            return False  # "パスワードをBitwardenで管理": only "パスワードを…に変更" gives a value
    value = value.rstrip(".!?)]}*_~")
    if len(value) < 3 or (not quote and value in prose.not_values) or _PLACEHOLDER.search(value):
        return False
    digits = sum(c.isdigit() for c in value)
    if kind == "numeric" and digits < 3:
        return False
    if direct:
        return value.isdigit() if kind == "numeric" else _generated(value)
    if link.strip() in (":", "：") and not digits and rest.strip() not in ("", ".", ";", ","):
        return False  # a label: "The password: field must not be logged"
    return kind != "ambiguous" or qualified or _generated(value)


_AROUND = 160
"""How far before and after a name its words are read (every match is bounded: linear in the text's length)."""


def _context(prose: _Prose, folded: str, start: int, end: int, between: str) -> tuple[bool, bool]:
    """(qualified, not_qualified): whether the words around a name make it a credential ("wifi key", "clé du
    réseau") or something else ("primary key", "clé USB")."""
    before = folded[max(0, start - _AROUND) : start]
    prefix = re.split(r"[\s\"'(]", before)[-1].rstrip("-_の的")
    words = [w.strip(".,;:!?()\"'") for w in before.split()[-2:]]
    words = [w.removesuffix("'s") for w in words]
    near = [*words, *between.split()]
    qualified = any(w in prose.qualifiers for w in near) or any(
        prefix.endswith(q) for q in prose.qualifiers if prefix and len(q) > 1
    )
    following = folded[end : end + 40].lstrip()
    unqualified = (
        bool(words and words[-1] in prose.not_qualifiers)
        or any(prefix.endswith(q) for q in prose.not_qualifiers if prefix)
        or any(following.startswith(q + " ") or following == q for q in prose.not_qualifiers)
    )
    return qualified, unqualified


def _said_in_words(folded: str) -> bool:
    """A secret given in prose, in any language of ``SECRET_VOCABULARY``: "my password is tulip", "the root pw for
    prod is …", "das WLAN-Passwort lautet …", "wifiのパスワードは…です", "пароль от почты — …", "changed my
    password to …". Unless quoted, the value must not be an ordinary word of a sentence ("the password is stored
    in the vault"); after a bare ``:`` (a label) it must end the sentence or hold a digit; a PIN needs three
    digits; a word that is not always a credential ("key", "clave", "ключ") needs a qualifier ("wifi key") or a
    value that looks generated."""
    prose = _prose()
    for match in prose.names.finditer(folded):
        name, start, end = match.group(), match.start(), match.end()
        cjk = _is_cjk(name)
        glued_ok = name in prose.glued and (cjk or len(name) >= 4)
        if start and _word_char(folded[start - 1]) and not glued_ok:
            continue
        if not cjk and end < len(folded) and _word_char(folded[end]):
            continue
        kind = prose.kinds[name]
        linked = prose.after.match(folded, end, end + _AROUND)
        qualified = True  # only a word that is not always a credential needs one
        if kind == "ambiguous":
            qualified, unqualified = _context(prose, folded, start, end, linked.group("between") if linked else "")
            if unqualified:
                continue
        if linked is not None:
            if _given(prose, kind, linked, cjk, qualified):
                return True
            continue
        to = prose.change.match(folded, end, end + _AROUND)
        if (
            to is not None
            and _changed(prose, folded, start, to.end("value"))
            and _given(prose, kind, to, cjk, qualified)
        ):
            return True
        if kind == "numeric" and _NEAR_NUMBER.match(folded, end, end + _AROUND):
            return True
        direct = prose.direct.match(folded, end, end + _AROUND)
        if direct is not None and qualified and _given(prose, kind, direct, cjk, qualified, direct=True):
            return True
    return False


def _changed(prose: _Prose, folded: str, start: int, end: int) -> bool:
    """Whether a verb of change comes just before the name ("I changed my password to …") or just after the value
    ("das Passwort auf … geändert")."""
    return bool(prose.change_verbs.search(folded, max(0, start - 40), start)) or bool(
        prose.change_verbs.search(folded, end, end + 30)
    )


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


_PAIR = re.compile(
    r"(?<![\w/.:@\-${])(?P<user>[^\W\d][\w.+\-]{1,31}):(?P<password>[^\s:/@\"'`,;()\[\]{}<>$]{3,64})(?![\w/@:{}$])"
)
_KNOWN_ACCOUNTS = frozenset(
    _split("root, admin, administrator, postgres, sa, pi, guest, oracle, mysql, elastic, sysadmin")
)
_NOT_A_PASSWORD = re.compile(
    r"^\d[\w.\-]*$|^(?:latest|stable|lts|slim|alpine|edge|nightly|value|values|key|pass|password|passwd|pwd|secret"
    r"|token|port|host|path|name|id)$"
)


def _login_pair(folded: str) -> bool:
    """A ``user:password`` pair: with a well-known account name ("admin:hunter2", "root:toor"), or in text that
    speaks of a login or a credential ("credentials for prod are deploy:Tr0ub4dor", "usuario y clave: ana:girasol").
    Not an image tag (``postgres:16``), a port (``localhost:8080``), a time or a ``key:value`` placeholder."""
    context: bool | None = None
    for match in _PAIR.finditer(folded):
        password = match.group("password").rstrip(".!?")
        if len(password) < 3 or _NOT_A_PASSWORD.search(password) or _PLACEHOLDER.search(password):
            continue
        if match.group("user") in _KNOWN_ACCOUNTS:
            return True
        if context is None:
            context = _prose().accounts.search(folded) is not None
        if context:
            return True
    return False


_SHAPE_STRIP = "\"'()[]{}<>.,;:!?`*_~"


def _password_shape(normal: str) -> bool:
    """A word of 8 to 64 characters mixing upper case, lower case, digits and symbols, as generated passwords do
    ("Xk9#mQ2$vL7p", "Tr0ub4dor&3"), whatever the words around it."""
    for word in normal.split():
        word = word.strip(_SHAPE_STRIP)
        if not 8 <= len(word) <= 64 or "://" in word:
            continue
        if (
            any(c.isupper() for c in word)
            and any(c.islower() for c in word)
            and any(c.isdigit() for c in word)
            and any(c in _GENERATED_SYMBOLS and c not in "@=" for c in word)
            and "\\" not in word
        ):
            return True
    return False


_HEX_OR_UUID = re.compile(
    r"(?<![A-Za-z0-9])(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|[0-9a-fA-F]{32,})(?![A-Za-z0-9])"
)
_IDENTIFIER_BEFORE = re.compile(
    r"\b(?:commit|commits|sha|sha1|sha256|hash|checksum|digest|revision|rev|id|ids|uuid|identifier|session|"
    r"request|trace|build|run|version|object|blob|tree|image)\b\W*(?:is\s+|was\s+)?\W*$",
    re.IGNORECASE,
)


def _hex_key(text: str) -> bool:
    """A UUID or a run of 32+ hex digits (API keys, webhook secrets), unless the words just before it say what
    identifier it is ("commit 3f9a…", "session id 0190…")."""
    for match in _HEX_OR_UUID.finditer(text):
        if not _IDENTIFIER_BEFORE.search(text[max(0, match.start() - 40) : match.start()]):
            return True
    return False


# A run of token characters long enough to be a generated secret (base64, base62, hex with letters).
_TOKEN = re.compile(r"[A-Za-z0-9+/_\-=]{32,}")
ENTROPY_BITS_PER_CHAR = 4.3
"""Shannon entropy above which a long token counts as random (a generated base64 key of 32+ characters is
around 4.5; long code identifiers stay near 4.0-4.25; hex such as a commit hash never exceeds 4)."""
MIXED_ENTROPY_BITS_PER_CHAR = 3.9
"""A lower bar for tokens that mix upper case, lower case and at least four digits, as generated keys do and
identifiers rarely do."""


def shannon_entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def _random_token(token: str) -> bool:
    entropy = shannon_entropy(token)
    if entropy > ENTROPY_BITS_PER_CHAR:
        return True
    digits = sum(c.isdigit() for c in token)
    upper = sum(c.isupper() for c in token)
    lower = sum(c.islower() for c in token)
    return entropy > MIXED_ENTROPY_BITS_PER_CHAR and digits >= 4 and upper >= 2 and lower >= 2


def find_secret(text: str) -> str | None:
    """What kind of credential ``text`` seems to hold (e.g. "an AWS access key"), or None. The text is matched
    NFKC-normalised (full-width and other compatibility forms as their plain letters) and, for words, casefolded."""
    normal = _normalized(text)
    for kind, pattern in _patterns():
        if pattern.search(normal):
            return kind
    if _assignment(normal):
        return "a password, token or key assignment"
    folded = normal.casefold()
    if _said_in_words(folded):
        return "a password, PIN or token given in words"
    if _login_pair(folded):
        return "a user name and password"
    if _hex_key(normal):
        return "a hexadecimal key or UUID"
    for match in _TOKEN.finditer(normal):
        token = match.group()
        if "/" in token.strip("/") and token.count("/") > 2:  # a path, not a key
            continue
        if _random_token(token):
            return "a long random token"
    if _password_shape(normal):
        return "a generated password"
    return None


def refusal(kind: str) -> str:
    """The one-line message for a refused memory (never the secret itself)."""
    return f"not stored: the text looks like a credential ({kind}); secrets are never kept as memories"


# ----- credentials inside a URL (``user:pass@``, ``?api-key=...``), masked for display -----
MASK = "***"

# Query parameters whose value is a credential: api-key, api_key, key, token, access_token, secret, password,
# sig (signed URLs), auth... Matched on the name without '-' and '_', lower-cased.
_SECRET_PARAM = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session", re.IGNORECASE)
# Fallback for text that urlsplit cannot take apart: userinfo before '@', and secret-looking parameters.
_USERINFO = re.compile(r"(?<=://)[^/?#@\s]*@")
_PARAM = re.compile(r"(?<=[?&;])([^=&;#\s]+)=([^&;#\s]*)")


def _secret_param(name: str) -> bool:
    return bool(_SECRET_PARAM.search(name.replace("-", "").replace("_", "")))


def mask_url_credentials(url: str) -> str:
    """``url`` with the password/user part and the values of credential-like query parameters replaced by
    ``***``; anything else (scheme, host, port, path, other parameters) as it is."""
    if "@" not in url and "=" not in url:
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(_secret_param(name) for name, _ in pairs):
                query = urlencode([(n, MASK if _secret_param(n) else v) for n, v in pairs], safe="*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # e.g. a malformed port or IPv6 literal: mask by pattern instead
        masked = _USERINFO.sub(MASK + "@", url)
        return _PARAM.sub(lambda m: f"{m.group(1)}={MASK}" if _secret_param(m.group(1)) else m.group(0), masked)
