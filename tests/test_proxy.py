"""Who the client is (issue 107, class 1): forwarded headers count only with `--trust-forwarded-for`, and then only
the hop the proxy adds (the last address of X-Forwarded-For); without it no header (X-Forwarded-For, X-Real-IP,
Forwarded, X-Forwarded-Host / -Proto / -Prefix) changes the client, its request limit or a URL the server writes.
Through real `serve` processes, directly and behind a real nginx (Debian's; skipped where absent), and the rule
itself as a property over any header values."""

import http.client
import ipaddress
import json
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
from starlette.requests import Request  # noqa: E402
from test_libretranslate import multipart  # noqa: E402

from conftest import FakeEngine, client_for, exchange, loopback_sources, start_server, wait_for  # noqa: E402
from vanilla_transformer.deploy.server.dispatch import client_address  # noqa: E402
from vanilla_transformer.deploy.server.settings import Settings  # noqa: E402

# What a client may write to pass for someone else (the six forged requests of the issue, and more)
FORGED = [
    [("X-Forwarded-For", "10.0.0.1")],
    [("X-Forwarded-For", "10.0.0.2, 10.0.0.3"), ("X-Forwarded-For", "10.0.0.4")],
    [("X-Real-IP", "10.0.0.5")],
    [("Forwarded", 'for=10.0.0.6;proto=https;host=evil.example, for="[2001:db8::6]"')],
    [
        ("X-Forwarded-For", "2001:db8::7"),
        ("X-Real-IP", "[2001:db8::7]:443"),
        ("True-Client-IP", "10.0.0.7"),
        ("CF-Connecting-IP", "10.0.0.7"),
        ("X-Client-IP", "10.0.0.7"),
    ],
    [("X-Forwarded-For", "not an address, " + "9" * 5000)],
    [("X-Forwarded-For", "")],
    [("X-Forwarded-For", "127.0.0.2:8080")],
]
# What a client may write to move the URLs the server writes (a proxy's headers, not ours to believe)
FORGED_URL = [
    ("X-Forwarded-Host", "evil.example"),
    ("X-Forwarded-Proto", "https"),
    ("X-Forwarded-Port", "8443"),
    ("X-Forwarded-Prefix", "/evil"),
    ("X-Forwarded-Server", "evil.example"),
    ("Forwarded", "host=evil.example;proto=https"),
    ("X-Original-URL", "/evil"),
    ("X-Scheme", "https"),
]


def call(url: str, method: str, path: str, body: bytes = b"", headers=(), source: str = "127.0.0.1"):
    """One HTTP request to `url` + `path` from the loopback address `source`, `headers` a list of (name, value), the
    same name possibly several times: (status, headers, body)."""
    parsed = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60, source_address=(source, 0))
    return exchange(connection, method, path, body, headers)


def translate(url, headers=(), source="127.0.0.1"):
    body = json.dumps({"q": "ab", "source": "de", "target": "en"}).encode()
    return call(url, "POST", "/translate", body, [("Content-Type", "application/json"), *headers], source)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


# ------------------------------------------------------------------------------------------------ the rule
PEER = "198.51.100.9"  # the connection's address in the tests of the rule


def request_of(headers) -> Request:
    return Request(
        {
            "type": "http",
            "method": "POST",
            "path": "/translate",
            "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers],
            "client": (PEER, 40000),
        }
    )


header_value = st.text(st.characters(min_codepoint=32, max_codepoint=255, blacklist_characters="\x7f"), max_size=300)
header_name = st.sampled_from(["X-Forwarded-For", "X-Real-IP", "Forwarded", "X-Forwarded-Host", "True-Client-IP"])
address = st.ip_addresses().map(str)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(header_name, header_value | address), max_size=4))
def test_untrusted_no_header_changes_the_client(headers):
    assert client_address(request_of(headers), False) == PEER


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(header_name, header_value | address), max_size=4), address)
def test_trusted_the_client_is_the_last_hop_whatever_came_before(headers, hop):
    """The proxy's appended address wins over any left part and any earlier X-Forwarded-For line; no other header
    counts."""
    headers = [*headers, ("X-Forwarded-For", f"{headers[0][1] if headers else ''}, {hop}")]
    found = ipaddress.ip_address(hop)
    found = getattr(found, "ipv4_mapped", None) or found
    expected = str(ipaddress.ip_network((found, 64), strict=False)) if found.version == 6 else str(found)
    assert client_address(request_of(headers), True) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(header_value | address, min_size=1, max_size=3))
def test_trusted_only_the_last_hop_counts_and_is_an_address_or_the_connection(values):
    """Any X-Forwarded-For lines (garbage, empty, a trailing comma, very long): the client depends on the last line's
    last address alone, and is one canonical address or the connection's (the proxy's), never a key the client
    chose; no value is an error."""
    found = client_address(request_of([("X-Forwarded-For", value) for value in values]), True)
    assert found == client_address(request_of([("X-Forwarded-For", values[-1].rpartition(",")[2])]), True)
    if "/" in found:  # an IPv6 client: its /64
        assert found == str(ipaddress.ip_network(found)) and found.endswith("/64")
    else:  # (the connection's, PEER, is an IPv4 address too)
        assert found == str(ipaddress.IPv4Address(found))


@pytest.mark.parametrize(
    "value, client",
    [
        ("10.0.0.1, 192.0.2.7", "192.0.2.7"),
        ("10.0.0.1,192.0.2.7:5123", "192.0.2.7"),
        ("[2001:DB8::1]:443", "2001:db8::/64"),
        ("2001:db8:0:0::1", "2001:db8::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("fe80::1%eth0", "fe80::/64"),
        ("2001:db8:0:7:ffff::9", "2001:db8:0:7::/64"),
        ("10.0.0.1, ", PEER),
        ("", PEER),
        ("unknown", PEER),
        ("192.0.2.7:http", PEER),
        ("[2001:db8::1", PEER),
        ("[2001:db8::1]x", PEER),
        ("192.0.2.7:\xb2", PEER),
        ("1" * 100_000, PEER),
        ("010.0.0.1", PEER),
    ],
)
def test_trusted_hop_forms(value, client):
    """A port or an IPv6 zone left out, one spelling per address (one limit, however the proxy writes it), an IPv6
    client as its /64, and what is not an address is the connection's."""
    assert client_address(request_of([("X-Forwarded-For", value)]), True) == client


def test_the_ipv6_addresses_of_one_64_share_one_limit_and_an_idle_client_is_forgotten_after_its_window(monkeypatch):
    """req_limit 2: three peers of one /64 are one client (the third is a 429), another /64 is another; the memory
    store forgets a key once it has been idle for its own window (a minute's limit: not a day)."""
    import asyncio

    from vanilla_transformer.deploy.server import access

    limiter = access.Access({}, {"minute": 2})

    def peer_request(peer):
        scope = request_of([]).scope
        return Request({**scope, "client": (peer, 40000)})

    async def statuses(peers):
        found = []
        for peer in peers:
            try:
                await limiter.check(None, client_address(peer_request(peer), False))
                found.append(200)
            except access.ServeError as error:
                found.append(error.status)
        return found

    peers = ["2001:db8::1", "2001:db8::2", "2001:db8::3", "2001:db8:0:1::1", "::ffff:192.0.2.1", "192.0.2.1"]
    assert asyncio.run(statuses(peers)) == [200, 200, 429, 200, 200, 200]
    counts, clock = access.MemoryCounts(), [1000.0]
    monkeypatch.setattr(access.time, "monotonic", lambda: clock[0])
    for i in range(10_001):
        asyncio.run(counts.hit([(f"vt:limit:client:{i}:minute", 2, 60)]))
    clock[0] += 121
    asyncio.run(counts.hit([("vt:limit:client:new:minute", 2, 60)]))
    assert len(counts.times) == 1 and len(counts.windows) == 1


# ------------------------------------------------------------------------------------------------ a real server
def test_forged_headers_change_nothing_without_trust(small_demo_model):
    """`serve --req-limit 2` on loopback, as users start it: forged proxy headers of any kind leave the client and its
    limit as they were (the third request is a 429 whatever the headers), and the translated file's URL (uvicorn
    itself reads no proxy header, from a loopback peer neither)."""
    proc, url = start_server(f"{small_demo_model}:de-en", "--req-limit", "2")
    try:
        body, content_type = multipart({"source": "de", "target": "en"}, "in.txt", b"ab\ncd")
        status, _, answer = call(
            url, "POST", "/translate_file", body, [("Content-Type", content_type), *FORGED_URL, *FORGED[0]]
        )
        assert status == 200, answer
        link = json.loads(answer)["translatedFileUrl"]
        assert link.startswith(f"{url}/download_file/"), link
        assert call(url, "GET", urllib.parse.urlsplit(link).path, headers=FORGED_URL)[0] == 200
        statuses = [translate(url, forged)[0] for forged in FORGED]
        assert statuses == [200] + [429] * (len(FORGED) - 1), statuses
        status, _, answer = translate(url, [*FORGED_URL, *FORGED[1]])
        assert status == 429 and json.loads(answer) == {"error": "Slowdown: 2 per 1 minute"}
    finally:
        stop(proc)


def test_forged_headers_move_no_url_the_app_writes():
    """The app itself reads no proxy header for a URL: the prefix's redirect and a translated file's address."""
    with client_for(FakeEngine(), url_prefix="/tr") as client:
        wait_for(lambda: client.get("/tr/health").status_code == 200, what="the app")
        answer = client.get("/", headers=FORGED_URL, follow_redirects=False)
        assert (answer.status_code, answer.headers["location"]) == (301, "/tr/")
        body, content_type = multipart({"source": "de", "target": "en"}, "in.txt", b"ab")
        answer = client.post("/tr/translate_file", content=body, headers=[("Content-Type", content_type), *FORGED_URL])
        assert answer.json()["translatedFileUrl"].startswith("http://testserver/tr/download_file/"), answer.json()


def test_a_loopback_server_answers_only_its_own_host_names_and_origins():
    """DNS rebinding and cross-origin forms: a server on a loopback --host answers only loopback Host names (and those
    --allowed-hosts adds), 400 otherwise; a POST whose Origin is neither its own nor allowed by --cors_origins is 403
    before any work; its own page (same origin) and LibreTranslate's clients (no Origin) are served."""
    from fastapi.testclient import TestClient

    from vanilla_transformer.commands import serve
    from vanilla_transformer.deploy.server.app import create_app

    def settings_of(argv, env=None):
        return Settings(**serve.limits(serve.parse_args(["m", *argv], env or {})))

    def status(settings, host, origin=None, form=False):
        headers = {"Host": host, **({"Origin": origin} if origin else {})}
        with TestClient(create_app([FakeEngine()], settings)) as client:
            wait_for(lambda: client.get("/health", headers=headers).status_code != 503, what="the app")
            fields = {"q": "ab", "source": "de", "target": "en"}
            answer = (
                client.post("/translate", data=fields, headers=headers)
                if form
                else client.post("/translate", json=fields, headers=headers)
            )
            assert answer.status_code == 200 or "error" in answer.json(), answer.text
            return answer.status_code

    loopback = settings_of([])
    assert [status(loopback, host) for host in ("localhost:5000", "127.0.0.1", "[::1]:5000", "LOCALHOST")] == [200] * 4
    assert status(loopback, "rebind.attacker.example:5000", "http://rebind.attacker.example:5000") == 400
    assert status(loopback, "rebind.attacker.example") == 400 and status(loopback, "") == 400
    assert status(settings_of(["--allowed-hosts", "tr.example"]), "tr.example:8080") == 200
    assert status(settings_of([], {"LT_ALLOWED_HOSTS": "tr.example,*"}), "x.example") == 200
    every = settings_of(["--host", "0.0.0.0"])
    assert (
        status(every, "tr.example") == 200
        and status(settings_of(["--host", "::", "--allowed-hosts", "a.example"]), "tr.example") == 400
    )
    assert status(loopback, "127.0.0.1:5000", "http://127.0.0.1:5000") == 200  # the page at / (same origin)
    for origin in ("https://evil.example", "null", "http://127.0.0.1:5001", "http://localhost:5000"):
        assert status(loopback, "127.0.0.1:5000", origin, form=True) == 403, origin
        assert status(every, "127.0.0.1:5000", origin) == 403, origin
    assert status(settings_of(["--cors_origins", "https://evil.example"]), "localhost", "https://evil.example") == 200
    assert status(settings_of(["--cors"]), "localhost", "https://evil.example", form=True) == 200


@pytest.mark.parametrize(
    "trust, proto, scheme",
    [
        (True, ["https"], "https"),
        (True, ["https, http"], "http"),
        (True, ["http", "evil, HTTPS"], "https"),
        (True, ["ftp"], "http"),
        (True, ["https, javascript"], "http"),
        (False, ["https"], "http"),
        (True, [], "http"),
    ],
)
def test_the_file_url_takes_the_scheme_of_the_proxys_hop_only_when_trusted(trust, proto, scheme):
    """Behind a TLS proxy with --trust-forwarded-for, translatedFileUrl is https: the last X-Forwarded-Proto hop, http
    or https only; never without the trust."""
    with client_for(FakeEngine(), trust_forwarded_for=trust) as client:
        wait_for(lambda: client.get("/health").status_code == 200, what="the app")
        body, content_type = multipart({"source": "de", "target": "en"}, "in.txt", b"ab")
        answer = client.post(
            "/translate_file",
            content=body,
            headers=[("Content-Type", content_type), *[("X-Forwarded-Proto", value) for value in proto]],
        )
        assert answer.json()["translatedFileUrl"].startswith(f"{scheme}://testserver/download_file/"), answer.json()


# ------------------------------------------------------------------------------------------------ behind nginx
def test_behind_nginx_trusted_limits_key_on_the_real_client(small_demo_model, nginx):
    """`--trust-forwarded-for` behind nginx (`X-Forwarded-For $proxy_add_x_forwarded_for`): the client is the address
    nginx saw. Two different forged left parts share the real client's one limit; a client forging the address of an
    exhausted one keeps its own."""
    loopback_sources("127.0.0.2")
    proc, url = start_server(f"{small_demo_model}:de-en", "--req-limit", "2", "--trust-forwarded-for")
    try:
        proxy = nginx(url)
        assert [translate(proxy, forged)[0] for forged in FORGED[:3]] == [200, 200, 429]
        assert translate(proxy, [("X-Forwarded-For", "127.0.0.2")])[0] == 429  # naming another client: still itself
        other = [
            translate(proxy, [("X-Forwarded-For", "127.0.0.1"), *FORGED[3]], source="127.0.0.2")[0] for _ in range(3)
        ]
        assert other == [200, 200, 429]  # its own limit, whatever it says of itself
        assert translate(url, [("X-Forwarded-For", "10.9.9.9")])[0] == 200  # (not through nginx: trusted as a proxy)
    finally:
        stop(proc)


def test_behind_nginx_untrusted_every_client_is_nginx(small_demo_model, nginx):
    """Without `--trust-forwarded-for` behind nginx, every client is nginx's address (one limit for all), although
    nginx's own X-Forwarded-For and X-Real-IP name three different clients."""
    loopback_sources("127.0.0.2", "127.0.0.3", "127.0.0.4")
    proc, url = start_server(f"{small_demo_model}:de-en", "--req-limit", "2")
    try:
        proxy = nginx(url)
        statuses = [translate(proxy, source=source)[0] for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4")]
        assert statuses == [200, 200, 429]
    finally:
        stop(proc)
