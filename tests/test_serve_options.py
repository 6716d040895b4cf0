"""Every option of `serve`, from its flag or its LT_* variable: each value is checked where it enters (empty, 0,
negative, NaN/inf, out of range, path-like, whitespace, control characters), an error names what the user set (the
flag, or the variable) and never shows a secret, 0 means what LibreTranslate means by it, and nothing widens who may
connect: the host, the API keys (`--api_key`, the key file), the metrics token, the CORS origins, the URL prefix."""

import argparse
import contextlib
import io
import ipaddress
import math
import os
import re
import stat

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from vanilla_transformer import cli, console
from vanilla_transformer.commands import serve
from vanilla_transformer.deploy.server.settings import KEY_FORM

OPTIONS = [action for action in serve.build_parser().options if action.option_strings and action.dest != "help"]
BY_DEST = {action.dest: action for action in OPTIONS}
# texts each option meets from a careless user or an attacker, besides hypothesis' own
HOSTILE = [
    "",
    " ",
    "\t",
    "0",
    "-0",
    "-1",
    "-2",
    "1",
    "00",
    "+1",
    "1_000",
    " 5",
    "5 ",
    "٥",
    "²",
    "1.5",
    "1e3",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e400",
    str(2**53),
    str(2**64),
    "9" * 5000,
    "/..",
    "..",
    "/.",
    "a/../b",
    "//",
    "/",
    "*",
    "null",
    "true",
    "false",
    "auto",
    "0.0.0.0",
    "::",
    "[::1]",
    "0x7f.0.0.1",
    "127.1",
    "localhost",
    "a\x00b",
    "a\nb",
    "a\x1b[31m",
    "\ufeffkey",
    "de",
    "https://a.example",
    "https://a.example/",
    "memory://",
    "C:\\keys",
    "~/keys",
    "-",
    "--debug",
]
PORT_RANGE, THREADS = (1, 65535), serve.MOST_THREADS


def parse(argv=(), env=None):
    """serve.parse_args, with what argparse itself prints on a refusal kept: (args or None, error message)."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return serve.parse_args(["model", *argv], env or {}), ""
    except SystemExit as error:
        assert error.code == 2
        return None, stderr.getvalue().strip().splitlines()[-1]
    except ValueError as error:
        return None, str(error)


def check_valid(dest: str, value) -> None:
    """The value an option holds after parsing is one the server can use as it says."""
    action = BY_DEST[dest]
    if action.nargs == 0:
        assert value is True or value is False
    elif action.choices is not None:
        assert value in action.choices
    elif dest in (
        "char_limit",
        "batch_limit",
        "req_limit",
        "hourly_req_limit",
        "daily_req_limit",
        "req_flood_threshold",
    ):
        assert type(value) is int and -1 <= value <= serve.BIGGEST
    elif dest in ("threads", "workers"):
        assert type(value) is int and 0 <= value <= THREADS
    elif dest == "port":
        assert type(value) is int and PORT_RANGE[0] <= value <= PORT_RANGE[1]
    elif dest in ("max_wait_ms", "request_timeout", "file_ttl"):
        assert type(value) is float and math.isfinite(value) and value >= 0 and (value > 0 or dest == "max_wait_ms")
    elif dest.startswith("max_"):
        assert type(value) is int and 1 <= value <= serve.BIGGEST
    elif dest == "host":
        assert value.strip() == value and value
        try:
            ipaddress.ip_address(value)
        except ValueError:
            last = value.rstrip(".").split(".")[-1]
            assert re.fullmatch(r"[A-Za-z0-9.-]+", value) and not re.fullmatch(r"[0-9]+|0[xX][0-9a-fA-F]*", last)
    elif dest == "url_prefix":
        assert re.fullmatch(r"(/[A-Za-z0-9._~-]+)*", value)
        assert not any(set(segment) == {"."} for segment in value.split("/")[1:])
    elif dest in ("api_key", "metrics_auth_token"):
        assert KEY_FORM.fullmatch(value)
    elif dest == "cors_origins":
        for origin in value:
            assert re.fullmatch(r"https?://[a-z0-9.\-\[\]:]+", origin) and not origin.endswith("/"), origin
    elif dest == "allowed_hosts":  # host names or addresses, as the Host header's host shows them, or * (any)
        for host in value:
            assert host == "*" or host == serve.allowed_host(host) == host.lower(), host
    elif dest in ("source_lang", "target_lang"):
        assert re.fullmatch(r"[A-Za-z0-9_]+(-[A-Za-z0-9_]+)*", value) and value.lower() != "auto"
    elif dest == "api_keys":
        assert value is None or value.strip()
    elif dest == "ner":
        assert isinstance(value, str)  # (a saved tagger or not: served_models says, before anything loads)
    else:
        assert dest == "req_limit_storage", dest  # (its own tests: the Redis engineer's)


def check_refusal(message: str, name: str, dest: str, text: str) -> None:
    assert message and name in message, (name, message)
    if dest in serve.SECRETS and len(text.strip()) >= 6:
        assert text not in message, message  # a key or token is never shown


TEXTS = st.one_of(
    st.sampled_from(HOSTILE), st.text(max_size=40), st.from_regex(r"[0-9a-zA-Z:/.\-\[\]]{0,30}", fullmatch=True)
)


@pytest.mark.parametrize("dest", [action.dest for action in OPTIONS if action.nargs != 0])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS)
def test_any_text_through_the_flag_or_the_variable_is_a_valid_value_or_an_error_naming_it(dest, text):
    """Each option's parser, both ways in: a value it accepts is valid; anything else is a ValueError (or argparse's
    exit 2) whose message names the flag, or the variable, that carried it - never another exception, never a
    secret in the message."""
    action, variable = BY_DEST[dest], serve.variables(dest)[0]
    flag = action.option_strings[0]
    for argv, env, name in (([f"{flag}={text}"], {}, flag), ([], {variable: text}, variable)):
        if "\x00" in text and env:
            continue  # (no environment holds a NUL)
        args, message = parse(argv, env)
        if args is None:
            check_refusal(message, name, dest, text)
        else:
            check_valid(dest, getattr(args, dest))
            assert args.named[dest] == name


@pytest.mark.parametrize("dest", [action.dest for action in OPTIONS if action.nargs == 0])
@given(text=TEXTS)
@settings(max_examples=30, deadline=None)
def test_a_switch_reads_true_or_false_from_its_variable_else_names_it(dest, text):
    args, message = parse([], {serve.variables(dest)[0]: text})
    if args is None:
        assert message.startswith(serve.variables(dest)[0]) and "expected true or false" in message
    else:
        assert getattr(args, dest) is (text.strip().lower() in serve.ENV_TRUE)
    assert getattr(parse([BY_DEST[dest].option_strings[0]])[0], dest) is True


def test_an_error_names_the_variable_when_the_value_came_from_it_and_the_flag_when_from_the_flag():
    for dest, bad in (
        ("char_limit", "-2"),
        ("port", "0"),
        ("threads", "-1"),
        ("max_queue", "0"),
        ("host", ""),
        ("url_prefix", "/.."),
        ("request_timeout", "inf"),
        ("compute_type", "int3"),
        ("cors_origins", "*"),
        ("source_lang", "auto"),
        ("api_keys", ""),
    ):
        variable, flag = serve.variables(dest)[0], BY_DEST[dest].option_strings[0]
        assert parse([], {variable: bad})[1].startswith(variable), dest
        assert flag in parse([f"{flag}={bad}"], {variable: "anything"})[1], dest  # (the flag wins: its value is named)
    message = parse([], {"LT_MAX_WAIT_MS": "61000"})[1]
    assert message.startswith("LT_MAX_WAIT_MS (61000 ms) must be less than --request_timeout (60 s)"), message
    message = parse(["--source_lang", "de"], {"LT_TARGET_LANG": "de"})[1]
    assert message.startswith("--source_lang and LT_TARGET_LANG name one language"), message


# ------------------------------------------------------------------------------------------------ who may connect
@pytest.mark.parametrize(
    "host",
    [
        "",
        " ",
        "\t",
        "0",
        "00",
        "127.1",
        "0x7f.0.0.1",
        "2130706433",
        "[::1]",
        "a b",
        "1.2.3.04",
        "-x",
        "x" * 300,
        "a..b",
        "ex\nample.com",
        "::ffff:0.0.0.0",
        "::0",
        "0:0::0",
        "::FFFF:127.0.0.1",
        "0::",
        "::0001",
        "FE80::1",
    ],
)
def test_a_host_that_could_widen_who_connects_is_refused(host):
    """An empty LT_HOST (uvicorn: every interface), a number the resolver reads as an address ("0" is 0.0.0.0)."""
    for argv, env, name in (([f"--host={host}"], {}, "--host"), ([], {"LT_HOST": host}, "LT_HOST")):
        if env and host.strip() != host and host.strip():
            continue  # (a variable is read stripped)
        args, message = parse(argv, env)
        assert args is None and message.startswith(name), (host, message)


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "0.0.0.0", "::", "::1", "fe80::1%eth0", "localhost", "example.com", "translate.example.com."]
)
def test_an_address_or_host_name_is_taken(host):
    assert parse(["--host", host])[0].host == host and parse([], {"LT_HOST": host})[0].host == host
    assert parse()[0].host == "127.0.0.1"  # loopback unless said


@pytest.mark.parametrize("way", ["flag", "LT_API_KEY", "VT_API_KEY"])
@pytest.mark.parametrize("key", ["", " ", "\t", "two words", "grüße", "a\x1bb", "k" * 1001])
def test_an_empty_or_unsendable_api_key_is_refused_never_read_as_no_key(way, key):
    args, message = parse(["--api_key", key] if way == "flag" else [], {} if way == "flag" else {way: key})
    assert args is None and message.startswith("--api_key" if way == "flag" else way), message
    assert key.strip() == "" or key.strip() not in message.replace("--api_key", "")


def test_the_api_key_from_the_flag_or_its_variables_is_served():
    assert serve.limits(parse(["--api_key", "k-1"])[0])["api_keys"] == {"k-1": None}
    assert serve.limits(parse([], {"VT_API_KEY": "k-2"})[0])["api_keys"] == {"k-2": None}
    assert parse([], {"VT_API_KEY": "k-2", "LT_API_KEY": "k-3"})[0].api_key == "k-3"
    assert parse(["--api_key", "k-1"], {"VT_API_KEY": ""})[0].api_key == "k-1"  # the flag wins, the variable unread
    assert serve.limits(parse()[0])["api_keys"] == {} and serve.limits(parse()[0])["metrics_auth_token"] == ""


@pytest.mark.parametrize("token", ["", " ", "a token", "\x7f"])
def test_an_empty_metrics_token_is_refused_never_read_as_no_token(token):
    for argv, env, name in (
        (["--metrics-auth-token", token], {}, "--metrics-auth-token"),
        ([], {"LT_METRICS_AUTH_TOKEN": token}, "LT_METRICS_AUTH_TOKEN"),
    ):
        args, message = parse(argv, env)
        assert args is None and message.startswith(name), message


@pytest.mark.parametrize(
    "origin",
    [
        "*",
        " * ",
        "null",
        "https://a.example/",
        "https://a.example/path",
        "a.example",
        "ftp://a.example",
        "https://*.a.example",
        "https://a.example:0",
        "https://a.example:70000",
        "https://[nope]",
        "https://a..example",
    ],
)
def test_cors_every_origin_only_through_cors_and_each_origin_as_a_browser_sends_it(origin):
    for argv, env, name in (
        (["--cors_origins", "https://ok.example", origin], {}, "--cors_origins"),
        ([], {"LT_CORS_ORIGINS": f"https://ok.example,{origin}"}, "LT_CORS_ORIGINS"),
    ):
        args, message = parse(argv, env)
        assert args is None and message.startswith(name), message


def test_cors_origins_are_written_as_a_browser_sends_them():
    args = parse(["--cors_origins", "HTTPS://A.Example:443", "http://b.example:8080", "http://[::1]:80"])[0]
    assert args.cors_origins == ["https://a.example", "http://b.example:8080", "http://[::1]"]
    assert serve.limits(parse(["--cors"])[0])["cors_origins"] == ("*",)
    assert serve.limits(parse([], {"LT_CORS_ORIGINS": " "})[0])["cors_origins"] == ()


@pytest.mark.parametrize(
    "prefix,expected",
    [("tr", "/tr"), ("/tr/", "/tr"), ("/", ""), ("", ""), ("/a/b", "/a/b"), ("/v1.2", "/v1.2"), ("/~x", "/~x")],
)
def test_a_url_prefix_is_one_path_under_the_root(prefix, expected):
    assert parse(["--url-prefix", prefix])[0].url_prefix == expected
    assert parse([], {"LT_URL_PREFIX": prefix})[0].url_prefix == expected


@pytest.mark.parametrize(
    "prefix",
    [
        "/..",
        "..",
        "/.",
        "/a/../b",
        "/a/./b",
        "/...",
        "//a//b",
        "/a b",
        "/a%2e",
        "/a?b",
        "/a#b",
        "/a\\b",
        "/a\x00",
        "/ä",
        "http://x/a",
        "/" + "a" * 300,
    ],
)
def test_a_url_prefix_that_leaves_its_path_is_refused(prefix):
    for argv, env, name in (
        (["--url-prefix", prefix], {}, "--url-prefix"),
        ([], {"LT_URL_PREFIX": prefix}, "LT_URL_PREFIX"),
    ):
        args, message = parse(argv, env)
        assert args is None and message.startswith(name), message


@given(st.text(max_size=30))
@settings(max_examples=200, deadline=None)
def test_a_url_prefix_parses_to_a_path_or_is_refused(text):
    try:
        prefix = serve.url_prefix(text)
    except argparse.ArgumentTypeError:
        return
    check_valid("url_prefix", prefix)
    assert serve.url_prefix(prefix) == prefix  # (read twice: the same)


@given(st.text(max_size=40))
@example("0")
@example("127.1")
@example("0x7f.1")
@example("")
@settings(max_examples=300, deadline=None)
def test_a_host_parses_to_an_address_or_a_name_else_is_refused(text):
    try:
        host = serve.host_address(text)
    except argparse.ArgumentTypeError:
        return
    check_valid("host", host)
    with contextlib.suppress(ValueError):  # an address: only in its one canonical form, never IPv4-mapped
        address = ipaddress.ip_address(host)
        assert str(address) == host and getattr(address, "ipv4_mapped", None) is None, host


# ------------------------------------------------------------------------------------------------ 0 and the limits
@pytest.mark.parametrize("flag", ["--req-limit", "--hourly-req-limit", "--daily-req-limit", "--req-flood-threshold"])
def test_a_request_limit_of_0_is_none_as_in_libretranslate(flag, tmp_path):
    """LibreTranslate builds no limiter for --req-limit 0 and adds no hourly or daily limit (or flood ban) unless it
    is over 0: here 0 is no limit too, on every route (before: IndexError, a 500, on the first request)."""
    from conftest import FakeEngine, client_for, wait_ready

    keys = tmp_path / "keys"
    keys.write_text("own 3\nplain\n", encoding="utf-8")
    args = parse([flag, "0", "--api-keys", str(keys), "--allowed-hosts", "testserver"])[0]  # (the test client's Host)
    with client_for(FakeEngine(), **serve.limits(args)) as client:
        wait_ready(client)
        for _ in range(5):
            answer = client.post("/translate", json={"q": "ab", "source": "de", "target": "en", "api_key": "plain"})
            assert answer.status_code == 200, answer.text
        for status in (200, 200, 200, 429):  # a key's own limit still holds
            answer = client.post("/translate", json={"q": "ab", "source": "de", "target": "en", "api_key": "own"})
            assert answer.status_code == status, answer.text


def test_memory_counts_with_a_limit_of_0_answer_a_full_window_not_an_index_error():
    import asyncio

    from vanilla_transformer.deploy.server.access import Access, MemoryCounts

    assert asyncio.run(MemoryCounts().hit([("k", 0, 60)])) == (0, 60)
    assert Access({}, {"minute": 0, "hour": 0, "day": -1}).limits == {}


@pytest.mark.parametrize("text", ["0", "-1", "5"])
def test_char_and_batch_limits_keep_libretranslates_meaning(text):
    """-1: none; any other number, 0 included, bounds each text's characters and a batch's texts (LibreTranslate
    refuses every non-empty text for --char-limit 0)."""
    args = parse(["--char-limit", text, "--batch-limit", text])[0]
    assert (args.char_limit, args.batch_limit) == (int(text), int(text))


# ------------------------------------------------------------------------------------------------ the key file
def test_the_key_file_is_read_with_a_bom_and_crlf_and_refused_clearly_otherwise(tmp_path):
    from vanilla_transformer.deploy.server.access import read_api_keys

    keys = tmp_path / "keys.txt"
    keys.write_bytes(b"\xef\xbb\xbfalpha 5\r\n# comment\r\nbeta\r\n")
    assert read_api_keys(keys) == {"alpha": 5, "beta": None}
    keys.write_bytes(b"Zq#8vLm2pR\n#c\n  # c\ngamma 3 # c\ndelta\t#c\nx# 2\n")  # a `#` inside a key is the key's
    assert read_api_keys(keys) == {"Zq#8vLm2pR": None, "gamma": 3, "delta": None, "x#": 2}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [
        ("", "give the key file's path"),
        ("-", "give the key file's path"),
        (tmp_path / "missing", "no such key file"),
        (tmp_path, "a directory, not a key file"),
        (fifo, "not a regular file"),
    ]
    if os.path.exists("/dev/zero") and stat.S_ISCHR(os.stat("/dev/zero").st_mode):
        cases.append(("/dev/zero", "not a regular file"))
    for path, message in cases:
        with pytest.raises(ValueError, match=message):
            read_api_keys(path)
    secret = "s3cret-key-value"
    for content, message in (
        (b"", "holds no API key"),
        (b"\n  \n# only\n", "holds no API key"),
        (f"ok\n{secret} \xff\n".encode("latin-1"), "line 2: bytes that are not UTF-8"),
        (f"ok\n{secret}\x1b\n".encode(), "line 2: a control character"),
        (f"ok\n{secret}\x0c\n".encode(), "line 2: a control character"),
        (f"ok\n{secret}ü\n".encode(), "line 2: a key is 1-1000 printable ASCII"),
        (f"{secret} 0\n".encode(), "line 1: expected `KEY` or"),
        (f"{secret} ²\n".encode(), "line 1: expected `KEY` or"),
        (f"{secret} 5 6\n".encode(), "line 1: expected `KEY` or"),
        (f"{secret}\n{secret}\n".encode(), "line 2: this key is already"),
    ):
        keys.write_bytes(content)
        with pytest.raises(ValueError, match=re.escape(message)) as error:
            read_api_keys(keys)
        assert secret not in str(error.value) and str(keys) in str(error.value)


@given(st.binary(max_size=200))
@example(b"\xef\xbb\xbfk\r\n")
@example(b"k\x00\n")
@example(b"k\xc2\x85\n")
@example(b"a\x1fb 5\n")
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_key_file_is_keys_the_server_can_match_or_an_error_naming_the_file(tmp_path, content):
    from vanilla_transformer.deploy.server.access import read_api_keys

    keys = tmp_path / "keys.txt"
    keys.write_bytes(content)
    try:
        read = read_api_keys(keys)
    except ValueError as error:
        assert str(error).startswith(str(keys)), error
        return
    assert read and all(KEY_FORM.fullmatch(key) and (limit is None or limit > 0) for key, limit in read.items())


def test_the_key_file_through_its_variable_is_named_by_it(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("k 0\n", encoding="utf-8")
    for argv, env, name in (
        (["--api-keys", str(keys)], {}, "--api-keys"),
        ([], {"LT_API_KEYS": str(keys)}, "LT_API_KEYS"),
    ):
        with pytest.raises(ValueError, match=f"^{name}: {re.escape(str(keys))}, line 1"):
            serve.limits(parse(argv, env)[0])
    assert parse([], {"LT_API_KEYS": "false"})[0].api_keys is None  # LibreTranslate's switch, off
    assert parse([], {"LT_API_KEYS": "True"})[1].startswith("LT_API_KEYS='True': give the key file")
    assert parse([], {"LT_API_KEYS": " "})[1].startswith("LT_API_KEYS='': an empty path")


# ------------------------------------------------------------------------------------------------ LibreTranslate's
def test_debug_after_serve_is_refused_as_documented(capsys):
    """`serve ... --debug` is LibreTranslate's --debug, refused by name (the console no longer takes it first: the
    server started with traces on); other commands' --debug is still the console's."""
    assert console.take_debug(["serve", "model", "--debug"]) == (False, ["serve", "model", "--debug"])
    assert console.take_debug(["translate", "model", "--debug"]) == (True, ["translate", "model"])
    assert cli.main(["serve", "model", "--debug"]) == 2
    assert "--debug is LibreTranslate's and not taken here" in capsys.readouterr().err


def test_libretranslates_variables_of_options_not_taken_are_refused_unless_default_or_false():
    args, message = parse([], {"LT_REQUIRE_API_KEY_SECRET": "true"})
    assert args is None and message.startswith("LT_REQUIRE_API_KEY_SECRET is LibreTranslate's")
    assert parse([], {"LT_DEBUG": "1"})[1].startswith("LT_DEBUG is LibreTranslate's --debug")
    assert parse([], {"LT_API_KEYS_REMOTE": "https://user:pw@keys.example"})[1].count("pw") == 0
    for variable, value in (
        ("LT_DEBUG", "false"),
        ("LT_SUGGESTIONS", "0"),
        ("LT_FRONTEND_LANGUAGE_SOURCE", "auto"),
        ("LT_FRONTEND_TIMEOUT", "500"),
        ("LT_SHARED_STORAGE", "memory://"),
        ("LT_SSL", ""),
    ):
        assert parse([], {variable: value})[0] is not None, variable


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--threads", "1025"], "--threads '1025': must be at most 1024"),
        (["--workers", "99999999999999999999"], "--workers '99999999999999999999': must be at most 1024"),
        (["--max_queue", "0"], "--max_queue '0': must be at least 1"),
        (["--max_request_bytes", str(2**53)], "must be at most"),
        (["--max_wait_ms", "-0.5"], "--max_wait_ms '-0.5': must be at least 0"),
        (["--request_timeout", "0"], "--request_timeout '0': must be more than 0"),
        (["--file_ttl", "1e400"], "--file_ttl '1e400': must be more than 0"),
        (["--port", "0"], "--port '0': not a port number"),
        (["--port", "٥٠٠٠"], "--port '٥٠٠٠': not a port number"),
        (["--char-limit", "1_000"], "--char-limit '1_000': not an integer"),
        (["--source_lang", "auto"], "'auto' asks for language detection"),
    ],
)
def test_numbers_and_names_out_of_range_are_refused_naming_the_flag(argv, message):
    args, said = parse(argv)
    assert args is None and message in said, said


def test_options_checked_against_the_models_are_named_as_the_user_set_them(monkeypatch):
    """A compute type where no model runs on CTranslate2 (it would be ignored), several workers for PyTorch, a tagger
    that is not one: named by the flag or by the variable that carried them."""
    from vanilla_transformer.model_dirs import ModelDir

    monkeypatch.setattr(
        serve,
        "recognise",
        lambda path, engine="auto", task=None: ModelDir(path, "translation", "pytorch").holding(task or "translation"),
    )
    for argv, env, name in (
        (["--compute_type", "int8"], {}, "--compute_type"),
        ([], {"LT_COMPUTE_TYPE": "int8"}, "LT_COMPUTE_TYPE"),
    ):
        with pytest.raises(ValueError, match=f"^{name} 'int8': the compute type is CTranslate2's"):
            serve.served_models(parse(argv, env)[0])
    with pytest.raises(ValueError, match="^LT_WORKERS: several batches at once need the CTranslate2 engine"):
        serve.served_models(parse([], {"LT_WORKERS": "2"})[0])
    for tagger in ("/no/tagger", ""):
        with pytest.raises(ValueError, match=f"^LT_NER '{tagger}' is not a saved tagger"):
            serve.served_models(parse([], {"LT_NER": tagger})[0])
    with pytest.raises(ValueError, match="^LT_REQ_LIMIT_STORAGE ") as error:
        serve.served_models(parse([], {"LT_REQ_LIMIT_STORAGE": "mongodb://user:pa55word@db"})[0])
    assert "pa55word" not in str(error.value)
