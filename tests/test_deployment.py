"""docs/deployment.md (issue 109): every file of docs/deployment/ is quoted whole by the page and run as it is, only
its placeholders substituted (ports, certificate paths, upstream addresses, the model, the secrets): nginx.conf on a
real nginx with TLS in front of two `serve` processes started from the systemd unit and the environment file, sharing
their request limits through a real redis-server with a password; the unit through `systemd-analyze verify`; the
alert rules against a real /metrics scrape; the key rotation (SIGHUP) on a real `serve` process; the move of a
LibreTranslate key database into a key file (scripts/libretranslate_keys.py). Each tool absent here is a skip."""

import http.client
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import ROOT, exchange, files_of_checkout, free_port, loopback_sources, start_server, wait_for

pytest.importorskip("fastapi")
from vanilla_transformer.deploy.server.dispatch import body_too_large  # noqa: E402

FOLDER = os.path.join(ROOT, "docs", "deployment")
PAGE = os.path.join(ROOT, "docs", "deployment.md")
UNIT = "vanilla-transformer@.service"
HOST = "translate.example.org"  # the site's name in nginx.conf and LT_ALLOWED_HOSTS
PREFIX = "/translator"
BINARY = "/opt/vanilla-transformer/.venv/bin/vanilla-transformer"  # the unit's ExecStart
MODEL = "/srv/vanilla-transformer/models/de-en-ct2"
KEYS_FILE = "/etc/vanilla-transformer/api-keys.txt"
REDIS_PLACE, REDIS_PASSWORD = "127.0.0.1:6379", "CHANGE-ME-redis-password"
METRICS_TOKEN = "CHANGE-ME-metrics-token"
TOKEN_FILE = "/etc/prometheus/vanilla-transformer-token"
KEYS = {"key-a": 60, "key-b": 4, "key-c": 1}  # the test's LibreTranslate keys and their requests per minute


def text_of(name: str) -> str:
    with open(os.path.join(FOLDER, name), encoding="utf-8") as f:
        return f.read()


def substituted(text: str, replacements: dict[str, str]) -> str:
    """`text` with each placeholder replaced, every one of them found: what the test runs is the file as it is."""
    for old, new in replacements.items():
        assert old in text, f"the placeholder {old!r} is not in the file"
        text = text.replace(old, new)
    return text


def environment_file(text: str) -> dict[str, str]:
    """An EnvironmentFile as systemd reads ours: `NAME=VALUE` lines, `#` comments and blank lines (no quotes, no
    spaces or continuations, which systemd would read otherwise than a shell)."""
    found = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Z][A-Z0-9_]*)=([^\s'\"\\]+)", line)
        assert match, f"not a plain NAME=VALUE line: {line!r}"
        found[match.group(1)] = match.group(2)
    return found


def unit_settings(text: str) -> dict[str, list[str]]:
    """The unit's `Key=value` settings (a key set several times: each value)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([A-Za-z]+)=(.*)", line)
        if match:
            found.setdefault(match.group(1), []).append(match.group(2))
    return found


def seconds(value: str) -> float:
    """An nginx or systemd time (`75s`, `90`, `2m`) in seconds."""
    number, unit = re.fullmatch(r"(\d+)(ms|s|m|min|h)?", value).groups()
    return int(number) * {"ms": 0.001, None: 1, "s": 1, "m": 60, "min": 60, "h": 3600}[unit]


def nginx_directive(text: str, name: str) -> list[str]:
    """The values of each simple directive `name VALUE;` of an nginx configuration."""
    return re.findall(r"^\s*" + name + r"\s+([^;{}\n]+);", text, re.M)


# ------------------------------------------------------------------------------------------------ the page
def test_the_page_quotes_every_file_whole_and_names_each():
    """Each file of docs/deployment/ is a block of docs/deployment.md after `<!-- file: docs/deployment/NAME -->`,
    byte for byte, and the page quotes no other."""
    page = open(PAGE, encoding="utf-8").read()
    quoted = re.findall(r"<!-- file: docs/deployment/(\S+) -->\n```[a-z]*\n(.*?)```\n", page, re.S)
    assert sorted(name for name, _ in quoted) == sorted(os.listdir(FOLDER))
    for name, block in quoted:
        assert block == text_of(name), f"docs/deployment.md quotes {name} otherwise than the file"


def test_the_refused_libretranslate_options_are_the_servers():
    """The migration checklist's table of LibreTranslate's options not taken is `settings.NOT_TAKEN`, row for row,
    each with its reason."""
    from vanilla_transformer.deploy.server.settings import NOT_TAKEN

    page = open(PAGE, encoding="utf-8").read()
    table = page.split("<!-- NOT_TAKEN -->", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `(--[a-z-]+)` \| (.*) \|$", table, re.M)
    assert rows == list(NOT_TAKEN.items())


def test_the_files_keep_the_server_and_the_proxy_in_step():
    """nginx has the server's body limit and answers a larger body with the server's JSON 413, and waits longer than
    the server's own time limit (so the server answers with its JSON 504); systemd waits longer than a graceful stop;
    the secrets and options are in the environment file, none in the unit; the prefix, the host name and the ports
    agree across the files."""
    env = environment_file(text_of("vanilla-transformer.env"))
    nginx = text_of("nginx.conf")
    unit = unit_settings(text_of(UNIT))
    size, limit = nginx_directive(nginx, "client_max_body_size"), int(env["LT_MAX_REQUEST_BYTES"])
    assert len(size) == 1 and re.fullmatch(r"\d+[km]", size[0])
    assert int(size[0][:-1]) * {"k": 1 << 10, "m": 1 << 20}[size[0][-1]] == limit
    answer = json.dumps({"error": body_too_large(limit).message})
    assert re.findall(r"^\s*return 413 '(.*)';$", nginx, re.M) == [answer]
    assert nginx_directive(nginx, "error_page") == ["413 = @request_too_large"]
    timeout = float(env["LT_REQUEST_TIMEOUT"])
    for name in ("proxy_read_timeout", "proxy_send_timeout"):
        assert [seconds(value) > timeout for value in nginx_directive(nginx, name)] == [True], name
    assert seconds(unit["TimeoutStopSec"][0]) > timeout
    assert re.findall(r"^\s*location\s+([^{]+?)\s*\{", nginx, re.M) == [
        f"{PREFIX}/",
        "@request_too_large",
        f"= {PREFIX}/metrics",
    ]
    assert env["LT_URL_PREFIX"] == PREFIX and env["LT_ALLOWED_HOSTS"] == HOST
    assert env["LT_HOST"] == "127.0.0.1" and env["LT_TRUST_FORWARDED_FOR"] == "true"
    assert nginx_directive(nginx, "server_name") == [HOST, HOST]
    upstream = [value.split()[0] for value in nginx_directive(nginx, "server")]
    assert upstream == ["127.0.0.1:5001", "127.0.0.1:5002"] and "%i" in unit["ExecStart"][0]
    assert nginx_directive(nginx, "hash") == ["$remote_addr"]
    assert "$proxy_add_x_forwarded_for" in nginx and "X-Forwarded-Proto $scheme" in nginx
    assert env["LT_API_KEYS"] == KEYS_FILE and REDIS_PASSWORD in env["LT_REQ_LIMIT_STORAGE"]
    assert env["LT_METRICS_AUTH_TOKEN"] == METRICS_TOKEN
    assert unit["EnvironmentFile"] == ["/etc/vanilla-transformer/vanilla-transformer.env"]
    assert text_of("vanilla-transformer.env").startswith("# /etc/vanilla-transformer/vanilla-transformer.env:")
    assert not [value for value in unit.get("Environment", []) if "LT_" in value]
    settings = "\n".join(line for line in text_of(UNIT).splitlines() if not line.startswith("#"))
    assert not re.search(r"(?i)password|token|api.?key|redis://", settings)
    assert unit["ExecReload"] == ["/bin/kill -HUP $MAINPID"]


# ------------------------------------------------------------------------------------------------ systemd
def test_the_unit_verifies_and_is_hardened(tmp_path):
    """`systemd-analyze verify` accepts the unit (an instance of it, its ExecStart's path the installed console
    command) without a warning, and it holds the hardening the page describes."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: the systemd package)")
    command = os.path.join(os.path.dirname(sys.executable), "vanilla-transformer")
    if not os.access(command, os.X_OK):
        pytest.skip("the vanilla-transformer console command is not installed beside this Python")
    (tmp_path / UNIT).write_text(substituted(text_of(UNIT), {BINARY: command}))
    (tmp_path / "vanilla-transformer@5001.service").symlink_to(UNIT)
    proc = subprocess.run(
        [analyze, "verify", "--man=no", str(tmp_path / "vanilla-transformer@5001.service")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
    )
    assert proc.returncode == 0 and "vanilla-transformer@" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    unit = unit_settings(text_of(UNIT))
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "User": "vanilla-transformer",
        "CapabilityBoundingSet": "",
    }.items():
        assert unit[key] == [value], key
    assert "--port %i" in unit["ExecStart"][0]


# ------------------------------------------------------------------------------------------------ key rotation
class Log:
    """A child's stdout and stderr, read line by line in a thread."""

    def __init__(self, proc):
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self.read, args=(proc.stdout,), daemon=True)
        self.thread.start()

    def read(self, stream):
        for line in stream:
            self.lines.append(line)

    def matching(self, pattern: str) -> list[str]:
        return [line for line in list(self.lines) if re.search(pattern, line)]


def status_with_key(url: str, key: str | None) -> int:
    body = json.dumps({"q": "ab", "source": "de", "target": "en", **({"api_key": key} if key else {})}).encode()
    request = urllib.request.Request(url + "/translate", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_sighup_rereads_the_key_file_and_a_bad_file_keeps_the_old_keys(small_demo_model, tmp_path):
    """`serve --api-keys FILE` (with --api_key too) re-reads FILE on SIGHUP: the new key works and the removed one is
    refused from then on, --api_key's stays, and the process is still serving (SIGHUP's default would have ended
    it); a bad file then keeps the keys read before and logs one error line naming the file and line, never a
    key."""
    if not hasattr(signal, "SIGHUP"):
        pytest.skip("no SIGHUP on this platform")
    keys = tmp_path / "keys.txt"
    keys.write_text("old-key\n")
    proc, url = start_server(
        f"{small_demo_model}:de-en", "--api-keys", str(keys), "--api_key", "fixed-key", "--req-limit", "1000"
    )
    log = Log(proc)
    try:
        assert [status_with_key(url, k) for k in ("old-key", "new-key", "fixed-key")] == [200, 403, 200]
        staged = tmp_path / "keys.new"
        staged.write_text("# rotated\nnew-key 50\n")
        os.replace(staged, keys)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: status_with_key(url, "new-key") == 200, timeout=30, what="the new key")
        assert [status_with_key(url, k) for k in ("old-key", "fixed-key", None)] == [403, 200, 403]
        assert proc.poll() is None
        wait_for(lambda: log.matching(rf"SIGHUP: 2 API key\(s\) read from {re.escape(str(keys))}"), what="the log")
        keys.write_text("new-key\nsecret-in-a-bad line\n")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log.matching("ERROR"), timeout=30, what="the error line")
        time.sleep(0.5)
        errors = log.matching("ERROR")
        assert len(errors) == 1 and f"{keys}, line 2:" in errors[0] and "secret" not in errors[0], errors
        assert [status_with_key(url, k) for k in ("new-key", "old-key", "fixed-key")] == [200, 403, 200]
        keys.unlink()
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: len(log.matching("ERROR")) == 2, timeout=30, what="the second error line")
        assert "no such key file" in log.matching("ERROR")[1] and status_with_key(url, "new-key") == 200
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_test_client_app_with_a_key_file_starts_without_signals(tmp_path):
    """The reloader needs the main thread's event loop (as `serve` runs the app); an app run elsewhere (a test client's
    thread) starts and serves without it."""
    from conftest import FakeEngine, client_for, wait_ready

    keys = tmp_path / "keys.txt"
    keys.write_text("k-1\n")
    with client_for(FakeEngine(), api_keys={"k-1": None}, api_keys_file=str(keys)) as client:
        wait_ready(client)
        answer = client.post("/translate", json={"q": "ab", "source": "de", "target": "en", "api_key": "k-1"})
        assert answer.status_code == 200, answer.text


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
@pytest.mark.parametrize("with_file", [False, True])
def test_sighup_in_the_apps_lifespan_rereads_the_file_or_says_there_is_none(tmp_path, caplog, with_file):
    """The app's lifespan in this (main) thread, as `serve` runs it: SIGHUP re-reads the key file, or, without one,
    logs that nothing changed; the process goes on either way (`systemctl reload` sends SIGHUP to any server)."""
    import asyncio
    import logging

    from conftest import FakeEngine
    from vanilla_transformer.deploy.server.app import Settings, create_app

    keys = tmp_path / "keys.txt"
    keys.write_text("k-1\n")
    settings = Settings(api_keys={"k-1": None}, api_keys_file=str(keys) if with_file else "")
    app = create_app([FakeEngine()], settings)
    access = app.state.server.access

    async def hang_up():
        async with app.router.lifespan_context(app):
            keys.write_text("k-2\n")
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(200):
                await asyncio.sleep(0.02)
                if "SIGHUP" in caplog.text:
                    break
        await asyncio.sleep(0)

    previous = signal.signal(signal.SIGHUP, lambda *_: None)  # (this test's process survives a missing handler)
    try:
        with caplog.at_level(logging.INFO):
            asyncio.run(hang_up())
    finally:
        signal.signal(signal.SIGHUP, previous)
    if with_file:
        assert access.keys == {"k-2": None} and f"SIGHUP: 1 API key(s) read from {keys}" in caplog.text
    else:
        assert access.keys == {"k-1": None} and "SIGHUP: no key file (--api-keys) to read again" in caplog.text


# ------------------------------------------------------------------------------------------------ LibreTranslate keys
# LibreTranslate's key table as its libretranslate/api_keys.py creates it (Database.__init__), and its insert (add)
LT_SCHEMA = """CREATE TABLE IF NOT EXISTS api_keys (
            "api_key"	TEXT NOT NULL,
            "req_limit"	INTEGER NOT NULL,
            "char_limit" INTEGER DEFAULT NULL,
            PRIMARY KEY("api_key")
        );"""
LT_INSERT = "INSERT INTO api_keys (api_key, req_limit, char_limit) VALUES (?, ?, ?)"


def libretranslate_database(path, rows, schema: str = LT_SCHEMA):
    """A key database as LibreTranslate writes it: `rows` of (api_key, req_limit, char_limit)."""
    with sqlite3.connect(path) as connection:
        connection.execute(schema)
        for row in rows:
            connection.execute(LT_INSERT, row)
    connection.close()
    return path


def move_keys(*argv):
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "libretranslate_keys.py"), *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_schema_is_libretranslates_where_its_checkout_is_given():
    """Opt-in (VT_LIBRETRANSLATE: a LibreTranslate checkout or its bare git directory): LT_SCHEMA and LT_INSERT are
    its api_keys.py's, read from there."""
    source = os.environ.get("VT_LIBRETRANSLATE")
    if not source:
        pytest.skip("set VT_LIBRETRANSLATE to a LibreTranslate checkout")
    code = " ".join(files_of_checkout(source, "libretranslate")["api_keys.py"].split())
    assert " ".join(LT_SCHEMA.split()) in code and LT_INSERT in code


def test_libretranslate_keys_move_into_a_key_file_the_server_reads(tmp_path):
    """scripts/libretranslate_keys.py on a database of LibreTranslate's schema: each key with its requests per
    minute, in order; what a key file cannot hold (a key with a space, a key starting with #, a req_limit of 0) left
    out and named by row, a key's own char_limit counted; never a key on stderr; an existing file refused without
    --force, and with it replaced keeping its mode; the database never written."""
    from vanilla_transformer.deploy.server.access import read_api_keys

    rows = [
        ("0f6e5f46-7d0e-4a8c-9d1e-2b9f1c3a4d5e", 120, None),
        ("has space", 10, None),
        ("key-with-#-inside", 30, 500),
        ("#looks-like-a-comment", 5, None),
        ("zero-key", 0, None),
        ("ключ", 5, None),
        ("last", 1, 0),
    ]
    database = libretranslate_database(tmp_path / "api_keys.db", rows)
    before = database.read_bytes()
    out = tmp_path / "etc" / "api-keys.txt"
    proc = move_keys(database, out)
    assert proc.returncode == 0, proc.stderr
    assert read_api_keys(out) == {"0f6e5f46-7d0e-4a8c-9d1e-2b9f1c3a4d5e": 120, "key-with-#-inside": 30, "last": 1}
    assert "3 key(s) written" in proc.stderr and "rows 2, 4, 6:" in proc.stderr and "rows 5:" in proc.stderr
    assert "1 key(s) with their own char_limit (rows 3)" in proc.stderr
    assert not [key for key, *_ in rows if key in proc.stderr]
    assert os.stat(out).st_mode & 0o777 == 0o640 & ~current_umask()
    assert database.read_bytes() == before
    assert move_keys(database, out).returncode == 1 and "--force" in move_keys(database, out).stderr
    os.chmod(out, 0o600)
    assert move_keys(database, out, "--force").returncode == 0 and os.stat(out).st_mode & 0o777 == 0o600
    with sqlite3.connect(tmp_path / "old.db") as connection:  # (LibreTranslate's schema before char_limit)
        connection.execute('CREATE TABLE api_keys ("api_key" TEXT NOT NULL, "req_limit" INTEGER NOT NULL)')
        connection.execute("INSERT INTO api_keys VALUES ('k', 7)")
    connection.close()
    assert move_keys(tmp_path / "old.db", tmp_path / "old.txt").returncode == 0
    assert read_api_keys(tmp_path / "old.txt") == {"k": 7}
    for bad in (tmp_path / "missing.db", out):
        proc = move_keys(bad, tmp_path / "x.txt")
        assert proc.returncode == 1 and proc.stderr.startswith("error:") and not (tmp_path / "x.txt").exists()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------------------------------------ the deployment
class Deployment:
    """nginx.conf on a real nginx (TLS, a self-signed certificate) in front of two `serve` processes, each started as
    the unit starts an instance (its ExecStart, its Environment and the environment file), sharing a real
    redis-server with a password; the keys file made from a LibreTranslate database by scripts/libretranslate_keys.py.
    Placeholders substituted: ports, certificate paths, upstream addresses, the model, the key file's path, Redis'
    address and password, the metrics token, the cache directory."""

    def __init__(self, model, folder):
        self.folder, self.model, self.procs = folder, model, []
        self.password, self.token = secrets.token_hex(16), secrets.token_hex(16)
        self.redis_port = free_port()
        self.start_redis()
        self.keys = folder / "api-keys.txt"
        database = libretranslate_database(folder / "api_keys.db", [(k, v, None) for k, v in KEYS.items()])
        proc = move_keys(database, self.keys)
        assert proc.returncode == 0, proc.stderr
        self.env = environment_file(
            substituted(
                text_of("vanilla-transformer.env"),
                {
                    KEYS_FILE: str(self.keys),
                    REDIS_PLACE: f"127.0.0.1:{self.redis_port}",
                    REDIS_PASSWORD: self.password,
                    METRICS_TOKEN: self.token,
                },
            )
        )
        self.ports = [free_port(), free_port()]
        self.servers = {}
        for port in self.ports:
            self.start_instance(port, wait=False)
        for port in self.ports:
            self.wait_instance(port)
        self.start_nginx()

    def start_redis(self):
        binary = shutil.which("redis-server")
        self.redis = subprocess.Popen(
            [binary, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--requirepass", self.password, "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        self.client = redis.Redis(host="127.0.0.1", port=self.redis_port, password=self.password)
        wait_for(lambda: self.ping(), timeout=30, what="redis-server")

    def ping(self) -> bool:
        import redis

        try:
            return self.client.ping()
        except redis.ConnectionError:
            return False

    def unit_command(self, port: int) -> tuple[list[str], dict[str, str]]:
        """The unit's ExecStart for instance `port` (%i), its console command run by this Python, and the process's
        environment: the unit's Environment= and the environment file's."""
        unit = substituted(text_of(UNIT), {"/var/cache/vanilla-transformer": str(self.folder / "cache")})
        settings = unit_settings(unit)
        argv = shlex.split(settings["ExecStart"][0].replace("%i", str(port)))
        assert argv[0] == BINARY and MODEL in argv
        argv = [
            sys.executable,
            "-m",
            "vanilla_transformer.cli",
            *[f"{self.model}:de-en" if a == MODEL else a for a in argv[1:]],
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LT_", "VT_API_KEY"))}
        for assignment in settings.get("Environment", []):
            env.update(item.split("=", 1) for item in shlex.split(assignment))
        return argv, {**env, **self.env}

    def start_instance(self, port: int, wait: bool = True):
        argv, env = self.unit_command(port)
        with open(self.folder / f"serve-{port}.log", "a") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.servers[port] = proc
        self.procs.append(proc)
        if wait:
            self.wait_instance(port)

    def wait_instance(self, port: int):
        proc = self.servers[port]

        def healthy():
            assert proc.poll() is None, (self.folder / f"serve-{port}.log").read_text()[-3000:]
            try:
                return direct(port, "GET", "/health")[0] == 200
            except OSError:
                return False

        wait_for(healthy, timeout=180, what=f"serve on {port}")

    def stop_instance(self, port: int):
        self.servers[port].terminate()
        self.servers[port].wait(timeout=90)

    def start_nginx(self):
        binary = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
        cert, key = self.folder / "cert.pem", self.folder / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
            + ["-days", "2", "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=DNS:{HOST}"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        self.http_port, self.https_port = free_port(), free_port()
        site = substituted(
            text_of("nginx.conf"),
            {
                "listen 80;": f"listen 127.0.0.1:{self.http_port};",
                "listen 443 ssl;": f"listen 127.0.0.1:{self.https_port} ssl;",
                f"/etc/letsencrypt/live/{HOST}/fullchain.pem": str(cert),
                f"/etc/letsencrypt/live/{HOST}/privkey.pem": str(key),
                "127.0.0.1:5001": f"127.0.0.1:{self.ports[0]}",
                "127.0.0.1:5002": f"127.0.0.1:{self.ports[1]}",
            },
        )
        (self.folder / "site.conf").write_text(site)
        temp = "\n    ".join(
            f'{kind}_temp_path "{self.folder / kind}";' for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (self.folder / "nginx.conf").write_text(f"""{"user root;" if os.geteuid() == 0 else ""}
worker_processes 1;
pid "{self.folder / "nginx.pid"}";
error_log "{self.folder / "error.log"}";
events {{ worker_connections 64; }}
http {{
    access_log off;
    {temp}
    include "{self.folder / "site.conf"}";
}}
""")
        self.nginx = subprocess.Popen(
            [
                binary,
                "-p",
                str(self.folder),
                "-c",
                str(self.folder / "nginx.conf"),
                "-e",
                str(self.folder / "error.log"),
            ]
            + ["-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(self.nginx)
        self.context = ssl.create_default_context(cafile=str(cert))

        def listening():
            assert self.nginx.poll() is None, (self.folder / "error.log").read_text()
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.https_port)) == 0

        wait_for(listening, timeout=30, what="nginx")

    def https(self, method, path, body=b"", headers=(), source="127.0.0.1"):
        """One request through nginx over TLS (the certificate verified for HOST), from `source`: (status, headers,
        body)."""
        sock = socket.create_connection(("127.0.0.1", self.https_port), timeout=60, source_address=(source, 0))
        connection = http.client.HTTPConnection(HOST, self.https_port, timeout=60)
        connection.sock = self.context.wrap_socket(sock, server_hostname=HOST)
        return exchange(connection, method, PREFIX + path, body, headers)

    def metrics(self, port: int) -> dict[tuple[str, tuple], float]:
        """(sample name, its labels) -> value of the instance's /metrics."""
        from prometheus_client.parser import text_string_to_metric_families

        status, _, body = direct(port, "GET", "/metrics", headers=[("Authorization", f"Bearer {self.token}")])
        assert status == 200, body
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(body.decode())
            for sample in family.samples
        }

    def close(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.redis.terminate()
        self.redis.wait(timeout=30)


def direct(port, method, path, body=b"", headers=()):
    """One request to a `serve` process itself, under the prefix."""
    return exchange(http.client.HTTPConnection("127.0.0.1", port, timeout=60), method, PREFIX + path, body, headers)


@pytest.fixture(scope="module")
def deployment(small_demo_model, tmp_path_factory):
    pytest.importorskip("redis", reason="the redis client is not installed (the [serve] extra)")
    pytest.importorskip("prometheus_client", reason="the [serve] extra is not installed")
    if shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"])) is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it makes the test's certificate)")
    folder = tmp_path_factory.mktemp("deployment")
    deployed = None
    try:
        deployed = Deployment(small_demo_model, folder)
        yield deployed
    finally:
        if deployed is not None:
            deployed.close()


JSON = ("Content-Type", "application/json")


def as_json(body: bytes):
    try:
        return json.loads(body)
    except ValueError:
        return body


def test_through_nginx_over_tls_a_client_gets_what_serve_answers_directly(deployment):
    """Every route through nginx (https, the prefix, Host translate.example.org) answers as each process does when
    asked directly, statuses and bodies; a translated file's URL is https under the site's name and downloads through
    nginx; http is redirected to https; /metrics is not served through nginx but by each process with its token."""
    key = [("X-API-Key", "key-a")]
    requests = [
        ("GET", "/languages", b"", []),
        ("GET", "/frontend/settings", b"", []),
        ("GET", "/health", b"", []),
        ("GET", "/v1/health", b"", []),
        ("GET", "/", b"", []),
        ("POST", "/translate", json.dumps({"q": ["ab", "cd e"], "source": "de", "target": "en"}).encode(), [JSON]),
        (
            "POST",
            "/translate",
            b"q=abc&source=de&target=en&alternatives=2",
            [("Content-Type", "application/x-www-form-urlencoded")],
        ),
        ("POST", "/translate", json.dumps({"q": "ab", "source": "auto", "target": "en"}).encode(), [JSON]),
        ("POST", "/detect", json.dumps({"q": "ab"}).encode(), [JSON]),
        ("POST", "/v1/translate", json.dumps({"sentences": ["ab", "ba"], "num_beams": 2}).encode(), [JSON]),
        ("POST", "/translate", json.dumps({"q": "ab", "source": "de", "target": "fr"}).encode(), [JSON]),
    ]
    for method, path, body, headers in requests:
        expected = [direct(port, method, path, body, [*headers, *key])[::2] for port in deployment.ports]
        assert expected[0] == expected[1], (path, expected)
        status, _, answer = deployment.https(method, path, body, [*headers, *key])
        assert (status, as_json(answer)) == (expected[0][0], as_json(expected[0][1])), (method, path, answer[:300])
    for headers in ([], [("X-API-Key", "wrong")]):
        status, _, answer = deployment.https("POST", "/translate", requests[5][2], [JSON, *headers])
        assert (status, json.loads(answer)) == (403, {"error": "Invalid API key"})

    from test_libretranslate import multipart

    body, content_type = multipart({"source": "de", "target": "en", "api_key": "key-a"}, "in.txt", b"ab\ncd")
    status, _, answer = deployment.https("POST", "/translate_file", body, [("Content-Type", content_type)])
    link = json.loads(answer)["translatedFileUrl"]
    assert status == 200 and link.startswith(f"https://{HOST}{PREFIX}/download_file/"), link
    status, _, translated = deployment.https("GET", urllib.parse.urlsplit(link).path.removeprefix(PREFIX))
    text = json.dumps({"q": "ab\ncd", "source": "de", "target": "en"}).encode()
    expected = json.loads(deployment.https("POST", "/translate", text, [JSON, *key])[2])["translatedText"]
    assert (status, translated.decode()) == (200, expected)

    connection = http.client.HTTPConnection("127.0.0.1", deployment.http_port, timeout=60)
    status, headers, _ = exchange(connection, "GET", PREFIX + "/languages", headers=[("Host", HOST)])
    assert (status, headers["Location"]) == (301, f"https://{HOST}{PREFIX}/languages")
    assert deployment.https("GET", "/metrics")[0] == 404
    assert direct(deployment.ports[0], "GET", "/metrics")[0] == 401
    assert deployment.metrics(deployment.ports[0])


def test_the_body_limit_and_the_prefix_are_the_servers_through_nginx(deployment):
    """A body of LT_MAX_REQUEST_BYTES reaches a process (a 400 for what it holds); one byte more is refused by nginx
    with the server's own 413 (its JSON, as a process answers it directly), never sent on: a process refusing it
    mid-upload would close the connection under nginx (a 502). A path outside the prefix is nginx's."""
    limit = int(deployment.env["LT_MAX_REQUEST_BYTES"])
    headers = [JSON, ("X-API-Key", "key-a")]
    for _ in range(3):
        status, _, answer = deployment.https("POST", "/translate", b"x" * (limit + 1), headers)
        assert (status, json.loads(answer)) == (413, {"error": body_too_large(limit).message}), answer[:300]
    direct_answer = direct(deployment.ports[0], "POST", "/translate", b"x" * (limit + 1), headers)
    assert (direct_answer[0], json.loads(direct_answer[2])) == (413, json.loads(answer))
    status, _, answer = deployment.https("POST", "/translate", b"x" * limit, headers)
    assert status == 400 and "JSON" in json.loads(answer)["error"], answer[:300]
    sock = socket.create_connection(("127.0.0.1", deployment.https_port), timeout=60)
    connection = http.client.HTTPConnection(HOST, deployment.https_port, timeout=60)
    connection.sock = deployment.context.wrap_socket(sock, server_hostname=HOST)
    assert exchange(connection, "GET", "/languages")[0] == 404


def translate_statuses(deployment, key, sources, forged=()):
    """The statuses of /translate through nginx with `key`, one request from each of `sources`."""
    body = json.dumps({"q": "ab", "source": "de", "target": "en"}).encode()
    return [
        deployment.https("POST", "/translate", body, [JSON, ("X-API-Key", key), *forged], source)[0]
        for source in sources
    ]


def requests_of(metrics, status):
    return sum(
        value
        for (name, labels), value in metrics.items()
        if name == "vt_requests_total" and dict(labels) == {"path": f"{PREFIX}/translate", "status": status}
    )


def test_the_limits_are_shared_by_both_processes_and_outlive_a_restart(deployment):
    """key-b may make 4 requests a minute (its LibreTranslate req_limit): through nginx from four client addresses,
    which nginx spreads over both processes, the 5th is a 429 though neither process saw 5. With one process stopped
    nginx sends its clients to the other (no 502), still 429; the process started again (as systemd restarts it)
    refuses the key too: the counts are Redis'."""
    a, b = deployment.ports
    sources = loopback_sources("127.0.0.1", "127.0.0.3", "127.0.0.4", "127.0.0.5")
    before = [deployment.metrics(port) for port in (a, b)]
    assert translate_statuses(deployment, "key-b", [*sources, sources[0]]) == [200] * 4 + [429]
    after = [deployment.metrics(port) for port in (a, b)]
    served = [requests_of(after[i], "200") - requests_of(before[i], "200") for i in (0, 1)]
    assert sum(served) == 4 and min(served) >= 1, served
    deployment.stop_instance(a)
    try:
        assert translate_statuses(deployment, "key-b", sources) == [429] * 4
        assert translate_statuses(deployment, "key-a", sources) == [200] * 4
    finally:
        deployment.start_instance(a)
    body = json.dumps({"q": "ab", "source": "de", "target": "en"}).encode()
    status, headers, answer = direct(a, "POST", "/translate", body, [JSON, ("X-API-Key", "key-b")])
    assert (status, json.loads(answer)) == (429, {"error": "Slowdown: 4 per 1 minute"}) and headers["Retry-After"]


def test_the_client_the_processes_see_is_the_real_one(deployment):
    """LT_TRUST_FORWARDED_FOR with nginx's X-Forwarded-For: a client connecting from 127.0.0.2 that writes another
    address into X-Forwarded-For is 127.0.0.2 to the servers (its offence, after key-c's one request a minute, is
    counted in Redis under that address), never the address it wrote nor nginx's."""
    sources = loopback_sources("127.0.0.2", "127.0.0.2")
    forged = [("X-Forwarded-For", "10.9.9.9"), ("X-Real-IP", "10.9.9.8")]
    assert translate_statuses(deployment, "key-c", sources, forged=forged) == [200, 429]
    offences = {key.decode() for key in deployment.client.scan_iter("vt:offences:*")}
    assert "vt:offences:127.0.0.2" in offences and not offences & {
        "vt:offences:10.9.9.9",
        "vt:offences:10.9.9.8",
    }, offences


# ------------------------------------------------------------------------------------------------ alerts
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
PROMETHEUS_OWN = {"up"}  # the series Prometheus itself writes for each target it scrapes (1: the scrape answered)
TARGET_LABELS = {"job", "instance"}  # the labels Prometheus adds to every scraped series


def metrics_of(expression: str) -> list[tuple[str, dict[str, str]]]:
    """The series a PromQL expression selects: (metric name, {label: value matched}), functions, keywords,
    grouping labels, durations and numbers left out."""
    expression = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expression)
    expression = re.sub(r"\[[^\]]*\]|\boffset\s+-?\w+", " ", expression)
    expression = re.sub(  # numbers (0.99, 3e9) outside the label matchers' strings
        r'"[^"]*"|(?<![\w:.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?',
        lambda m: m.group(0) if m.group(0)[0] == '"' else " ",
        expression,
    )
    found = []
    for match in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*(\()?", expression):
        name, matchers, call = match.groups()
        if call or name in PROMQL_WORDS or re.fullmatch(r"\d.*", name):
            continue
        labels = dict(re.findall(r'(\w+)\s*=~?\s*"([^"]*)"', matchers or ""))
        found.append((name, labels))
    return found


@pytest.mark.parametrize(
    "expression, found",
    [
        ('up{job="x"} == 0', [("up", {"job": "x"})]),
        ("process_resident_memory_bytes > 3e9", [("process_resident_memory_bytes", {})]),
        (
            'histogram_quantile(0.99, sum by (instance, le) (rate(a_bucket{path=~".*/t", s="5.."}[10m]))) > 5',
            [("a_bucket", {"path": ".*/t", "s": "5.."})],
        ),
        ("sum(rate(a_total[5m])) / on (job) group_left b_total offset 5m > 0.05", [("a_total", {}), ("b_total", {})]),
    ],
)
def test_the_metric_names_of_an_expression_are_found(expression, found):
    assert metrics_of(expression) == found


DURATION = re.compile(r"(\d+(ms|s|m|h|d|w|y))+")


def test_the_alert_rules_are_a_prometheus_rule_file_of_metrics_the_server_exports(deployment):
    """alerts.yml has Prometheus' rule-file shape (groups of named rules, each an alert with an expression, a `for`
    duration, string labels and annotations) and every metric its expressions use is a sample of a real /metrics
    scrape of a process (or Prometheus' own `up`), with the labels it matches on; prometheus.yml scrapes each
    process of nginx.conf's upstream at the prefix's /metrics with the metrics token and loads these rules."""
    yaml = pytest.importorskip("yaml")
    rules_file = yaml.safe_load(text_of("alerts.yml"))
    assert set(rules_file) == {"groups"} and rules_file["groups"]
    names = []
    for group in rules_file["groups"]:
        assert set(group) <= {"name", "rules", "interval", "limit"} and isinstance(group["name"], str), group
        names.append(group["name"])
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}, rule
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"]) and isinstance(rule["expr"], str), rule
            assert DURATION.fullmatch(str(rule.get("for", "0s"))), rule
            for part in ("labels", "annotations"):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in rule.get(part, {}).items()), rule
    assert len(names) == len(set(names))

    translate_statuses(deployment, "key-a", ["127.0.0.1"])
    samples = {**deployment.metrics(deployment.ports[0]), **deployment.metrics(deployment.ports[1])}
    labels_of: dict[str, set] = {}
    values_of: dict[tuple[str, str], set] = {}
    for name, labels in samples:
        labels_of.setdefault(name, set()).update(label for label, _ in labels)
        for label, value in labels:
            values_of.setdefault((name, label), set()).add(value)
    used = [
        (name, labels)
        for group in rules_file["groups"]
        for r in group["rules"]
        for name, labels in metrics_of(r["expr"])
    ]
    assert {name for name, _ in used} >= {"vt_requests_total", "vt_request_seconds_bucket", "up"}
    for name, labels in used:
        if name in PROMETHEUS_OWN:
            assert set(labels) <= TARGET_LABELS
            continue
        assert name in labels_of, f"{name} is not in /metrics: {sorted(labels_of)}"
        assert set(labels) <= labels_of[name] | TARGET_LABELS, (name, labels)
        if "path" in labels:  # a path matcher matches the path of a route the server served
            assert any(re.fullmatch(labels["path"], value) for value in values_of[(name, "path")]), labels

    scrape = yaml.safe_load(text_of("prometheus.yml"))
    assert scrape["rule_files"] == ["/etc/prometheus/rules/vanilla-transformer.yml"]
    (job,) = scrape["scrape_configs"]
    upstream = [server.split()[0] for server in nginx_directive(text_of("nginx.conf"), "server") if ":" in server]
    assert job["static_configs"] == [{"targets": upstream}] and job["job_name"] == "vanilla-transformer"
    assert job["metrics_path"] == deployment.env["LT_URL_PREFIX"] + "/metrics"
    assert job["authorization"] == {"credentials_file": TOKEN_FILE}
