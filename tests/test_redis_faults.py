"""The Redis of `--req-limit-storage` failing in every way a real one does (down, restarted, read-only, out of memory,
too slow, refusing the password, the user or a command, dropping the connection, its script cache flushed, a key of
the wrong type), tried on a redis-server of these tests' own: each is a 503 with Retry-After and one log line, passes
by itself, and no line shows a secret of the URL, whatever its form (hypothesis); at start, one `error:` line."""

import asyncio
import logging
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
redis = pytest.importorskip("redis", reason="the redis client is not installed (the [serve] extra)")
from conftest import FakeEngine, client_for, free_port, start_server, wait_ready  # noqa: E402
from vanilla_transformer import cli  # noqa: E402
from vanilla_transformer.deploy.server.access import RedisCounts, check_storage_uri, ping, storage_name  # noqa: E402
from vanilla_transformer.deploy.server.errors import ServeError  # noqa: E402

LOGGER = "vanilla_transformer.deploy.server.access"
PASSWORD = "Qz@x:k/w?#&=+%25 j"  # every character a URL reserves: written percent-encoded in the URL
USER = "vt-limits"


class OwnRedis:
    """A redis-server on a loopback port for one test (its faults would disturb the shared one), nothing saved to
    disk, with an ACL user USER whose password is PASSWORD; `admin`: one connection of the default user (no password),
    which stays logged in whatever password is set later."""

    def __init__(self):
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
        self.command = [
            binary,
            "--port",
            str(free_port()),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tempfile.mkdtemp(prefix="vt-redis-faults-"),
        ]
        self.port = int(self.command[2])
        self.start()

    def start(self):
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.admin = redis.Redis(host="127.0.0.1", port=self.port, single_connection_client=True)
        for _ in range(200):
            try:
                self.admin.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        self.admin.execute_command("ACL", "SETUSER", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all")

    def stop(self):
        self.admin.close()
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def url(self, user=True, query="?socket_timeout=0.5"):
        auth = f"{quote(USER, safe='')}:{quote(PASSWORD, safe='')}@" if user else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0{query}"

    def kill_clients(self):  # every connection but the admin's
        self.admin.client_kill_filter(_type="normal", skipme=True)


@pytest.fixture
def own_redis():
    pytest.importorskip("redis")
    server = OwnRedis()
    yield server
    server.proc.terminate()
    server.proc.wait(timeout=10)


def translate(client):
    return client.post("/translate", json={"source": "de", "target": "en", "q": "ab"})


def secret_free(*texts):
    """No text shows the password, as written in the URL or decoded, nor a part of it."""
    return not any(part in text for text in texts for part in (PASSWORD, quote(PASSWORD, safe=""), "Qz", "k/w"))


def another_users_password(server):
    server.admin.execute_command("ACL", "SETUSER", USER, "resetpass", ">another")
    server.kill_clients()


def paused(server):  # every client paused past the URL's socket_timeout (0.5 s)
    server.admin.execute_command("CLIENT", "PAUSE", "1500", "ALL")


# name: (what the log line says, the URL has the user, the fault, its end)
FAULTS = {
    "down": ("cannot be reached", True, OwnRedis.stop, OwnRedis.start),
    "read-only": (
        "is read-only",
        True,
        lambda s: s.admin.execute_command("REPLICAOF", "127.0.0.1", str(free_port())),
        lambda s: s.admin.execute_command("REPLICAOF", "NO", "ONE"),
    ),
    "out of memory": (
        "is out of memory",
        True,
        lambda s: s.admin.config_set("maxmemory-policy", "noeviction") and s.admin.config_set("maxmemory", "1"),
        lambda s: s.admin.config_set("maxmemory", "0"),
    ),
    "too slow": ("did not answer in time", True, paused, lambda s: s.admin.execute_command("CLIENT", "UNPAUSE")),
    "wrong password": (
        "refuses this server",
        True,
        another_users_password,
        lambda s: s.admin.execute_command("ACL", "SETUSER", USER, "resetpass", f">{PASSWORD}"),
    ),
    "no password": (
        "refuses this server",
        False,
        lambda s: s.admin.config_set("requirepass", PASSWORD) and s.kill_clients(),
        lambda s: s.admin.config_set("requirepass", ""),
    ),
    "command not allowed": (
        "refuses this server",
        True,
        lambda s: s.admin.execute_command("ACL", "SETUSER", USER, "-evalsha", "-eval"),
        lambda s: s.admin.execute_command("ACL", "SETUSER", USER, "+@all"),
    ),
    "wrong type": (
        "answered with an error",
        True,
        lambda s: [s.admin.set(key, "not a sorted set") for key in s.admin.scan_iter("vt:limit:*")],
        lambda s: s.admin.flushall(),
    ),
}


@pytest.mark.parametrize("name", FAULTS)
def test_every_redis_fault_is_a_503_with_retry_after_and_one_log_line_then_passes_by_itself(own_redis, name, caplog):
    words, user, fault, end = FAULTS[name]
    url = own_redis.url(user)
    with (
        client_for(FakeEngine(), req_limit=100, req_limit_storage=url) as client,
        caplog.at_level(logging.WARNING, logger=LOGGER),
    ):
        wait_ready(client)
        assert translate(client).status_code == 200
        fault(own_redis)
        try:
            answers = [translate(client) for _ in range(2)]
            others = [client.get(path) for path in ("/languages", "/v1/health", "/metrics")]
        finally:
            end(own_redis)
        assert [answer.status_code for answer in answers] == [503, 503], [answer.text for answer in answers]
        assert all(
            answer.headers["Retry-After"] == "5" and "limit storage" in answer.json()["error"] for answer in answers
        )
        assert [other.status_code for other in others] == [200] * 3  # what is not limited goes on answering
        assert translate(client).status_code == 200  # back, without a restart
    lines = [record.getMessage() for record in caplog.records if record.name == LOGGER]
    assert len(lines) == 2 and words in lines[0] and "is back" in lines[1], lines  # one when it goes, one when back
    assert storage_name(url) in lines[0] and secret_free(*lines, *(a.text for a in answers + others)), lines


def test_a_dropped_connection_a_flushed_script_cache_and_a_restart_pass_unseen(own_redis, caplog):
    """A connection the Redis dropped (CLIENT KILL, a restart) is retried once on a new one, and a script the Redis
    forgot (SCRIPT FLUSH) is sent again: no request fails, no line is logged, the counts go on."""
    with (
        client_for(FakeEngine(), req_limit=4, req_limit_storage=own_redis.url()) as client,
        caplog.at_level(logging.WARNING, logger=LOGGER),
    ):
        wait_ready(client)
        assert translate(client).status_code == 200
        own_redis.kill_clients()
        assert translate(client).status_code == 200
        own_redis.admin.script_flush()
        assert translate(client).status_code == 200
        own_redis.stop()
        own_redis.start()  # (nothing saved: a restarted Redis has forgotten the counts)
        assert [translate(client).status_code for _ in range(5)] == [200] * 4 + [429]
    assert [record.getMessage() for record in caplog.records if record.name == LOGGER] == []


def test_a_counter_that_is_not_a_number_or_of_the_wrong_type_is_a_503_not_a_500(own_redis):
    """Keys the server counts in, changed by someone else: an offence count that is not a number, a request log that
    is a string (WRONGTYPE from the script)."""
    with client_for(FakeEngine(), req_limit=1, req_flood_threshold=5, req_limit_storage=own_redis.url()) as client:
        wait_ready(client)
        assert [translate(client).status_code for _ in range(2)] == [200, 429]
        for key in own_redis.admin.scan_iter("vt:offences:*"):
            own_redis.admin.set(key, "many")
        assert translate(client).status_code == 503
        for key in own_redis.admin.scan_iter("vt:offences:*"):
            own_redis.admin.delete(key)
            own_redis.admin.zadd(key, {"a": 1})
        assert translate(client).status_code == 503
        own_redis.admin.flushall()
        assert translate(client).status_code == 200


@pytest.mark.parametrize(
    "fault, words",
    [
        ("wrong password", "the Redis refuses this server"),
        ("read-only replica", "the Redis is read-only"),
        ("out of memory", "the Redis is out of memory"),
        ("a password with an unencoded /", "not a URL redis-py can read"),
        ("an unencoded @ in ?password=", "or after the host"),
    ],
)
def test_a_redis_that_cannot_count_is_one_error_line_at_start_without_its_password(
    own_redis, small_demo_model, capsys, fault, words
):
    url = own_redis.url()
    if fault == "wrong password":
        url = url.replace(quote(PASSWORD, safe=""), "not-it")
    elif fault == "read-only replica":
        own_redis.admin.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))
    elif fault == "out of memory":
        own_redis.admin.config_set("maxmemory-policy", "noeviction")
        own_redis.admin.config_set("maxmemory", "1")
    elif fault == "a password with an unencoded /":
        url = f"redis://:{PASSWORD.split('?')[0]}@127.0.0.1:{own_redis.port}/0"
    else:
        url = f"redis://127.0.0.1:{own_redis.port}/0?password={PASSWORD.split('?')[0]}"
    assert cli.main(["serve", str(small_demo_model), "--req-limit-storage", url]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "vanilla-transformer serve: error: --req-limit-storage " in err, err
    assert words in err and secret_free(err), err


def test_a_real_server_answers_503_while_its_redis_is_read_only_and_logs_it_once(own_redis, small_demo_model):
    """`vanilla-transformer serve` as users start it, its Redis turned into a replica and back: 503 with Retry-After
    while it is read-only, translations again after; its output has one line for each change and no password."""
    proc, base = start_server(small_demo_model, "--req-limit", "100", "--req-limit-storage", own_redis.url())

    def status():
        request = urllib.request.Request(
            base + "/v1/translate", data=b'{"sentences": ["ein Hund"]}', headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, None
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("Retry-After")

    try:
        assert status() == (200, None)
        own_redis.admin.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))
        assert [status() for _ in range(3)] == [(503, "5")] * 3
        own_redis.admin.execute_command("REPLICAOF", "NO", "ONE")
        assert status() == (200, None)
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    lines = output.splitlines()
    assert [sum(word in line for line in lines) for word in ("is read-only", "Redis at")] == [1, 2], output
    assert secret_free(output), output


# ------------------------------------------------------------------------------------------------ the URL's secrets
# A secret: pieces of letters no message holds, joined by the characters a URL reserves; none of its pieces may show
PIECES = st.text(alphabet="QXZJKWVqxzjkwv", min_size=3, max_size=6)
SEPARATORS = st.sampled_from(list("@:/?#&=+%;$!*'[] ") + ["%40", "%3A", "%2F", "%"])
SECRETS = st.tuples(PIECES, st.lists(st.tuples(SEPARATORS, PIECES), max_size=3)).map(
    lambda parts: parts[0] + "".join(separator + piece for separator, piece in parts[1])
)
FORMS = [
    "redis://:{p}@127.0.0.1:1/0",
    "redis://{u}:{p}@127.0.0.1:1/0",
    "rediss://{u}:{p}@127.0.0.1:1",
    "unix://:{p}@/nonexistent/vt-redis.sock?db=0",
    "unix://{u}:{p}@/nonexistent/vt-redis.sock",
    "redis://127.0.0.1:1/0?password={p}",
    "redis://127.0.0.1:1/0?username={u}&password={p}&db=0",
    "REDIS://{u}:{p}@127.0.0.1:1?socket_timeout=1",
    "redis:/:{p}@127.0.0.1:1",
    "http://{u}:{p}@127.0.0.1:1",
    "redis://:{p}@127.0.0.1:{u}",
    "{u}:{p}@127.0.0.1:1",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(form=st.sampled_from(FORMS), user=SECRETS, password=SECRETS, encode=st.booleans())
def test_no_line_shows_a_secret_of_the_storage_url_in_any_form(form, user, password, encode):
    """Whatever the URL (parsed or not, a password percent-encoded or not): the error check_storage_uri raises, the
    name log lines use, the error ping raises (a Redis that cannot be reached) and the log line a request writes hold
    no piece of the user or password."""

    def written(text):
        return quote(text, safe="") if encode else text

    url = form.format(u=written(user), p=written(password))
    texts = [storage_name(url)]
    try:
        check_storage_uri(url)
    except ValueError as error:
        texts.append(str(error))
    else:
        with pytest.raises(OSError) as refused:
            ping(url)
        texts.append(str(refused.value))
        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger(LOGGER).addHandler(handler)
        try:
            assert asyncio.run(unavailable(url)) == 503
        finally:
            logging.getLogger(LOGGER).removeHandler(handler)
        texts += [record.getMessage() for record in records]
    assert not [
        piece for piece in re.findall("[QXZJKWVqxzjkwv]{3,}", f"{user} {password}") for text in texts if piece in text
    ], (url, texts)


async def unavailable(url) -> int:
    """The status a request limited by `url`'s Redis gets."""
    counts = RedisCounts(url)
    try:
        await counts.hit([("vt:limit:k:minute", 1, 60)])
    except ServeError as error:
        return error.status
    finally:
        await counts.close()
    return 200


@pytest.mark.parametrize("query", ["ssl_cert_reqs=hunter2", "protocol=9", "ssl_cert_reqs=hunter2&protocol=9"])
def test_a_bad_query_value_is_one_error_line_without_a_secret(query, capsys):
    """A query value redis-py refuses while building its client (a RedisError, not only a ValueError) is one `error:`
    line, exit 2, that shows no secret value: never a trace."""
    assert cli.main(["serve", "/nonexistent", "--req-limit-storage", f"rediss://:hunter2@127.0.0.1:1/0?{query}"]) == 2
    err = capsys.readouterr().err
    assert "error: --req-limit-storage rediss://127.0.0.1:1/0" in err and err.count("\n") == 1, err
    assert "hunter2" not in err and "Traceback" not in err
