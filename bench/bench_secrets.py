"""The memory filter's secrets said in prose, measured on sentences it was not written against.

    python bench/bench_secrets.py          # recall and false refusals, by language, and the time per call

The sentences below are the held-out half: the tests (``tests/test_memory_store.py``) hold the tuning half. Each
language has sentences that give a secret (they must be refused) and ordinary sentences about passwords, keys,
codes and logins (they must be kept). Nothing is written anywhere.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from co_cli.secrets import find_secret  # noqa: E402

SECRETS: dict[str, list[str]] = {
    "en": [
        "the office printer admin password is Pelican77",
        "for the record, the backup disk passphrase was tangerine",
        "Jenkins creds: builder / Harbor2019",
        "the alarm code at mum's house is 3308",
        "our home wifi key is lighthouse",
        "the signing secret for the webhook: kz81Pq-x0",
        "sudo pw on the pi is raspberry",
        "my bank PIN number is 6142",
        "ops:Meadow44 is the grafana login",
        "the staging token is ZZ-4412-QA",
    ],
    "es": [
        "la contraseña de la VPN es Pelicano33",
        "mi clave del banco es 7781",
        "la clave de la red wifi es almendra",
        "las credenciales del router son admin:Faro2020",
        "el código de acceso del portal es 4520",
    ],
    "de": [
        "das Kennwort für den Drucker ist Pinguin55",
        "der Zugangscode fürs Büro lautet 9174",
        "mein E-Mail-Passwort: Holunder7",
        "das Passwort habe ich auf Schneeball3 gesetzt",
        "die PIN meiner Bankkarte ist 2288",
    ],
    "fr": [
        "le mot de passe de la box est Hirondelle8",
        "le digicode de l'immeuble est 4B217",
        "mon mdp gmail c'est Coquelicot",
        "la clé du réseau wifi est Noisette44",
        "le code PIN du téléphone est 1357",
    ],
    "pt": [
        "a senha do e-mail é Caju2021",
        "o PIN do cartão é 8024",
        "a palavra-passe do router é Andorinha5",
        "as credenciais do servidor são root:Mangueira9",
        "troquei a senha para Maracuja77",
    ],
    "it": [
        "la password della VPN è Gabbiano12",
        "le credenziali del NAS sono admin:Ulivo88",
        "il codice di accesso del cancello è 6613",
        "la chiave della rete è Limoncello",
        "ho impostato la password a Cipresso4",
    ],
    "ja": [
        "社内VPNのパスワードはHaru2023です",
        "ルーターの管理者パスワード：Tsuki-77",
        "キャッシュカードの暗証番号は5830です",
        "WiFiのパスワードは「umi1234」",
        "パスワードをNatsu99に変更した",
    ],
    "zh": [
        "公司VPN的密码是Hehua2022",
        "银行卡密码是660318",
        "路由器管理员密码：Xiaomi-88",
        "邮箱的口令是Meihua7",
        "服务器密钥为k8s-Qw91",
    ],
    "ru": [
        "пароль от роутера — Черёмуха5",
        "пароль от рабочей почты: Сирень2021",
        "PIN-код от карты 7711",
        "логин и пароль от сервера: root:Тайга99",
        "поменял пароль на Рябина42",
    ],
}

ORDINARY: dict[str, list[str]] = {
    "en": [
        "The user rotates database passwords every quarter",
        "The user's password manager is KeePassXC",
        "The API key for the weather service is stored in Vault",
        "The key point of the talk was caching",
        "The user's PIN is never written down",
        "The sort key is the creation date",
        "The login screen shows a captcha after 3 tries",
        "The credentials file is ~/.aws/credentials",
        "The token budget for summaries is 2000",
        "The secret to fast builds is the cache",
    ],
    "es": [
        "La contraseña caduca cada tres meses",
        "El usuario guarda sus contraseñas en KeePass",
        "La clave está en usar caché",
        "La llave de casa está en el cajón",
        "El PIN nunca se apunta",
    ],
    "de": [
        "Das Passwort muss mindestens 12 Zeichen haben",
        "Der Benutzer verwaltet Passwörter mit KeePassXC",
        "Der Schlüssel liegt beim Nachbarn",
        "Die PIN wird nie aufgeschrieben",
        "Der Fremdschlüssel zeigt auf die Tabelle users",
    ],
    "fr": [
        "Le mot de passe expire dans 30 jours",
        "L'utilisateur garde ses mots de passe dans Bitwarden",
        "La clé de la voiture est sur la table",
        "Le code PIN n'est jamais noté",
        "La clé primaire est un UUID",
    ],
    "pt": [
        "A senha expira em 30 dias",
        "O usuário usa o Bitwarden para as senhas",
        "A chave do carro está na mesa",
        "O PIN nunca é anotado",
        "A chave primária é o campo id",
    ],
    "it": [
        "La password scade dopo 30 giorni",
        "L'utente tiene le password in Bitwarden",
        "La chiave della macchina è sul tavolo",
        "Il PIN non viene mai scritto",
        "La chiave primaria è il campo id",
    ],
    "ja": [
        "パスワードは30日で期限切れになります",
        "ユーザーはパスワードを1Passwordで管理しています",
        "暗証番号は絶対にメモしません",
        "外部キーはusersテーブルを参照します",
        "パスワードは8文字以上が必要です",
    ],
    "zh": [
        "密码每30天过期一次",
        "用户用1Password管理密码",
        "密码至少需要8位",
        "主键是id字段",
        "钥匙在桌子上",
    ],
    "ru": [
        "Пароль истекает через 30 дней",
        "Пользователь хранит пароли в Bitwarden",
        "Ключ от машины лежит на столе",
        "PIN-код никогда не записывается",
        "Первичный ключ — поле id",
    ],
}


def main() -> None:
    print("| language | secrets refused | ordinary text refused |")
    print("|---|---|---|")
    missed: list[str] = []
    wrong: list[str] = []
    for language in SECRETS:
        caught = [text for text in SECRETS[language] if find_secret(text) is not None]
        refused = [text for text in ORDINARY[language] if find_secret(text) is not None]
        missed += [text for text in SECRETS[language] if text not in caught]
        wrong += refused
        print(f"| {language} | {len(caught)}/{len(SECRETS[language])} | {len(refused)}/{len(ORDINARY[language])} |")
    total = sum(len(v) for v in SECRETS.values())
    ordinary = sum(len(v) for v in ORDINARY.values())
    print(f"| all | {total - len(missed)}/{total} | {len(wrong)}/{ordinary} |")
    for text in missed:
        print(f"missed: {text}")
    for text in wrong:
        print(f"refused: {text}")
    sentences = [t for v in (*SECRETS.values(), *ORDINARY.values()) for t in v]
    runs = 20
    started = time.perf_counter()
    for _ in range(runs):
        for text in sentences:
            find_secret(text)
    print(f"time per sentence: {(time.perf_counter() - started) / runs / len(sentences) * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
