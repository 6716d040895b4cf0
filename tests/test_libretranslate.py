"""LibreTranslate's API as `serve` speaks it: several pairs in one server and pivoting, alternatives, HTML, files,
language detection, the settings and spec pages, LibreTranslate's limits and keys, and a real server holding two
models under concurrent clients."""

import json
import re
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
from conftest import FakeEngine, client_for, post_json, start_server, wait_ready  # noqa: E402
from vanilla_transformer import data  # noqa: E402
from vanilla_transformer.deploy.server.markup import rebuild, segments, sentences  # noqa: E402
from vanilla_transformer.deploy.server.pdf import PDF  # noqa: E402


def lt(client, **fields):
    return client.post("/translate", json=fields)


def test_every_pair_from_one_server_and_a_pivot_where_no_model_is_direct():
    """de-en and en-fr served: /languages lists each language with what it reaches (de -> fr through en); each pair
    goes to its own model; /v1/translate names its pair (needed with several)."""
    de_en, en_fr = FakeEngine(reverse=False), FakeEngine(source="en", target="fr", reverse=False)
    with client_for(de_en, en_fr) as client:
        wait_ready(client)
        assert client.get("/languages").json() == [
            {"code": "de", "name": "German", "targets": ["en", "fr"]},
            {"code": "en", "name": "English", "targets": ["fr"]},
            {"code": "fr", "name": "French", "targets": []},
        ]
        assert lt(client, q="ab", source="de", target="en").json() == {"translatedText": "en(ab)"}
        assert lt(client, q=["ab", "cd"], source="en", target="fr").json() == {"translatedText": ["fr(ab)", "fr(cd)"]}
        assert lt(client, q="ab", source="de", target="fr").json() == {"translatedText": "fr(en(ab))"}
        refused = lt(client, q="ab", source="fr", target="de")
        assert refused.status_code == 400
        assert refused.json() == {"error": "German (de) is not available as a target language from French (fr)"}
        assert lt(client, q="ab", source="de", target="zz").json() == {"error": "zz is not supported"}
        assert client.post("/v1/translate", json={"sentences": ["ab"], "source": "de", "target": "fr"}).json() == {
            "translations": ["fr(en(ab))"]
        }
        unnamed = client.post("/v1/translate", json={"sentences": ["ab"]})
        assert unnamed.status_code == 422 and "2 pairs (de-en, en-fr)" in unnamed.json()["error"]
        assert lt(client, q="ab", source="en", target="en").json() == {"translatedText": "ab"}  # nothing to do


def test_two_models_for_one_pair_is_an_error():
    from vanilla_transformer.deploy.server.app import Settings, create_app

    with pytest.raises(ValueError, match="two models translate de -> en"):
        create_app([FakeEngine(), FakeEngine()], Settings())


def test_alternatives_are_the_n_best_and_refused_past_the_beam_limit():
    engine = FakeEngine()
    with client_for(engine, max_beams=4) as client:
        wait_ready(client)
        assert lt(client, q="ab", source="de", target="en", alternatives=2).json() == {
            "translatedText": "ba",
            "alternatives": ["ba #1", "ba #2"],
        }
        from vanilla_transformer.deploy.server.libretranslate import unique

        assert unique(["ba ", "ba #1", " ba #1", "ba #2"], "ba") == ["ba #1", "ba #2"]  # whitespace aside, once each
        assert lt(client, q=["ab", "c"], source="de", target="en", alternatives="1").json() == {
            "translatedText": ["ba", "c"],
            "alternatives": [["ba #1"], ["c #1"]],
        }
        assert client.post(
            "/translate", data={"q": "ab", "source": "de", "target": "en", "alternatives": "0"}
        ).json() == {"translatedText": "ba"}
        for alternatives, message in (
            (4, "must be <= 3 (--max_beams)"),
            ("two", "is not a number"),
            (-1, "must be >= 0"),
        ):
            refused = lt(client, q="ab", source="de", target="en", alternatives=alternatives)
            assert refused.status_code == 400 and message in refused.json()["error"]
        nbest = client.post("/v1/translate", json={"sentences": ["ab", ""], "num_return_sequences": 2})
        assert nbest.json() == {"translations": [["ba", "ba #1"], ["", ""]]}


def test_text_is_translated_line_by_line_and_html_text_node_by_text_node():
    with client_for(FakeEngine()) as client:
        wait_ready(client)
        assert lt(client, q="ab\n\n  cd \r\n--", source="de", target="en").json() == {
            "translatedText": "ba\n\n  dc \r\n--"
        }
        page = (
            '<!DOCTYPE html><p class="a&amp;b">ab &amp; <b>cd</b></p><script>var x = "ab";</script>'
            '<!-- ab --><img alt="ab"> &copy;'
        )
        assert lt(client, q=page, source="de", target="en", format="html").json() == {
            "translatedText": (
                '<!DOCTYPE html><p class="a&amp;b">&amp; ba <b>dc</b></p><script>var x = "ab";</script>'
                '<!-- ab --><img alt="ab"> &copy;'
            )
        }
        assert lt(client, q="<p>a &lt; b", source="de", target="en", format="html").json() == {  # unclosed: lenient
            "translatedText": "<p>b &lt; a"
        }


TAGS = st.sampled_from(
    [
        "<p>",
        "</p>",
        "<b>",
        "</b>",
        '<a href="x?a=1&amp;b=2">',
        "</a>",
        "<br/>",
        "<!-- c -->",
        "<script>if (a < b) {}</script>",
        "<style>p{}</style>",
        "&amp;",
        "&copy;",
        "&#39;",
        "\n",
    ]
)
WORDS = st.text(alphabet="abc XYZ123.,'", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(TAGS | WORDS, max_size=12))
def test_html_markup_comes_back_byte_for_byte(parts):
    """Property: any document of tags, comments, scripts, entities and text, with every text node translated (here
    upper-cased), keeps every tag as it was and in order; with translations equal to the text, the whole document
    comes back byte for byte."""
    document = "".join(parts)
    pieces = segments(document, "html")
    assert rebuild(pieces, sentences(pieces)) == document
    translated = rebuild(pieces, [s.upper() for s in sentences(pieces)])
    markup = re.compile(r"<[a-z!/][^<>]*>")
    assert markup.findall(translated.replace("<SCRIPT>", "")) == markup.findall(document.replace("<SCRIPT>", ""))


def test_a_file_is_translated_and_downloaded_once():
    from vanilla_transformer.deploy.server.libretranslate import safe_filename

    with client_for(FakeEngine(), max_sentences=2) as client:
        wait_ready(client)
        text = "\ufeffab\n\ncd\nef\n".encode()  # a byte-order mark; more lines than --max_sentences
        answer = client.post(
            "/translate_file", data={"source": "de", "target": "en"}, files={"file": ("notes.txt", text, "text/plain")}
        )
        assert answer.status_code == 200, answer.text
        url = answer.json()["translatedFileUrl"]
        assert re.fullmatch(r"http://testserver/download_file/[0-9a-f]{32}\.notes\.txt", url)
        path = url.removeprefix("http://testserver")
        download = client.get(path)
        assert download.status_code == 200 and download.content == b"ba\n\ndc\nfe\n"
        assert download.headers["content-disposition"] == 'attachment; filename="notes.txt"'
        assert client.get(path).status_code == 404  # given once
        page = client.post(
            "/translate_file",
            data={"source": "de", "target": "en"},
            files={"file": ("../a b.html", b"<h1>ab</h1>", "text/html")},
        )
        downloaded = client.get(page.json()["translatedFileUrl"].removeprefix("http://testserver"))
        assert (
            downloaded.content == b"<h1>ba</h1>" and 'filename="a_b.html"' in downloaded.headers["content-disposition"]
        )
        for files, fields, message in (
            ({"file": ("x.rtf", b"ab", "application/rtf")}, {"source": "de", "target": "en"}, "not supported"),
            ({"file": ("x.txt", b"\xff\xfe ab", "text/plain")}, {"source": "de", "target": "en"}, "is not UTF-8 text"),
            ({"file": ("x.txt", b"ab", "text/plain")}, {"source": "de"}, "missing target"),
            (None, {"source": "de", "target": "en"}, "missing file"),
            ({"file": ("x.txt", b"ab", "text/plain")}, {"source": "xx", "target": "en"}, "xx is not supported"),
        ):
            refused = client.post("/translate_file", data=fields, files=files)
            assert refused.status_code == 400 and message in refused.json()["error"], refused.text
    assert safe_filename("..\\..\\etc/passwd") == "passwd" and safe_filename("\x00..") == "file"


def test_detect_and_auto_choose_between_the_served_source_languages():
    """lingua, restricted to the served languages: a German and an English text each go to their own model; a text
    in a language served only as a target is a 400; one source language needs no detection."""
    pytest.importorskip("lingua")
    engines = [
        FakeEngine(reverse=False),
        FakeEngine(source="en", target="de", reverse=False),
        FakeEngine(source="de", target="fr", reverse=False),
    ]
    with client_for(*engines) as client:
        wait_ready(client)
        german, english = "Ein Mann fährt mit dem Fahrrad durch die Stadt.", "Two dogs are playing in the snow."
        found = client.post("/detect", data={"q": german}).json()
        assert found[0]["language"] == "de" and 50 < found[0]["confidence"] <= 100
        assert [row["language"] for row in found] == ["de", "en"]
        answer = lt(client, q=[german, english], source="auto", target="de").json()
        assert answer["translatedText"] == [german, f"de({english})"]  # de -> de: the text itself
        assert [row["language"] for row in answer["detectedLanguage"]] == ["de", "en"]
        french = client.post("/detect", json={"q": "Une femme marche dans la rue avec son chien."})
        assert french.status_code == 400 and "fr is not supported as a source language" in french.json()["error"]
        assert client.post("/detect").status_code == 400 and client.get("/detect").status_code == 405
    with client_for(FakeEngine()) as client:
        wait_ready(client)
        assert client.post("/detect", data={"q": "anything"}).json() == [{"language": "de", "confidence": 100.0}]


def test_settings_spec_suggest_and_health_pages():
    with client_for(FakeEngine(), char_limit=5) as client:
        wait_ready(client)
        assert client.get("/health").json() == {"status": "ok"} and client.post("/health").status_code == 405
        page = client.get("/frontend/settings").json()
        assert page["charLimit"] == 5 and page["apiKeys"] is False and page["suggestions"] is False
        assert page["language"] == {
            "source": {"code": "de", "name": "German"},
            "target": {"code": "en", "name": "English"},
        }
        assert page["supportedFilesFormat"] == [
            ".txt",
            ".html",
            ".htm",
            ".docx",
            ".pptx",
            ".odt",
            ".odp",
            ".epub",
            ".srt",
            *PDF,  # where the pdf extra is installed
        ]
        spec = client.get("/spec").json()
        assert {"/translate", "/detect", "/languages", "/translate_file", "/v1/translate"} <= set(spec["paths"])
        assert client.post("/spec").status_code == 405
        refused = client.post("/suggest", data={"q": "a", "s": "b", "source": "de", "target": "en"})
        assert refused.status_code == 403 and refused.json() == {"error": "Suggestions are disabled on this server."}


def test_libretranslates_limits_and_api_keys(tmp_path):
    from vanilla_transformer.deploy.server.access import read_api_keys

    keys = tmp_path / "keys.txt"
    keys.write_text("# key requests-per-minute\nalpha 2\nbeta\n", encoding="utf-8")
    with client_for(FakeEngine(), api_keys=read_api_keys(keys), req_limit=3, char_limit=4, batch_limit=2) as client:
        wait_ready(client)
        assert lt(client, q="ab", source="de", target="en").status_code == 403
        for _ in range(2):
            assert lt(client, q="ab", source="de", target="en", api_key="alpha").status_code == 200
        slow = lt(client, q="ab", source="de", target="en", api_key="alpha")
        assert slow.status_code == 429 and slow.json() == {"error": "Slowdown: 2 per 1 minute"}
        assert 1 <= int(slow.headers["retry-after"]) <= 60
        for _ in range(3):  # beta has the server's --req-limit, counted apart from alpha's
            assert (
                client.post("/v1/translate", json={"sentences": ["a"]}, headers={"x-api-key": "beta"}).status_code
                == 200
            )
        assert client.post("/v1/translate", json={"sentences": ["a"], "api_key": "beta"}).status_code == 429
    with client_for(FakeEngine(), char_limit=4, batch_limit=2) as client:
        wait_ready(client)
        assert lt(client, q="abcde", source="de", target="en").json() == {
            "error": "Invalid request: request (5) exceeds text limit (4)"
        }
        assert lt(client, q=["a", "b", "c"], source="de", target="en").json() == {
            "error": "Invalid request: request (3) exceeds text limit (2)"
        }
        assert client.get("/frontend/settings").json()["keyRequired"] is False
    for text, message in (
        ("alpha 0\n", "line 1: expected"),
        ("a\na\n", "line 2: this key is already"),
        ("# none\n", "holds no API key"),
        ("a b c\n", "line 1"),
    ):
        keys.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            read_api_keys(keys)


def test_serve_command_refuses_what_cannot_be_one_server(small_demo_model, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("k 0\n", encoding="utf-8")
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00k\n")
    for argv, message in (
        ([f"{small_demo_model}:de-en", f"{small_demo_model}:de-en"], "two models translate de -> en"),
        ([f"{small_demo_model}:de-en", f"{small_demo_model}:en-de", "--source_lang", "de"], "name one model's"),
        ([str(small_demo_model), "--api-keys", str(keys)], f"{keys}, line 1: expected"),
        ([str(small_demo_model), "--api-keys", ""], "--api-keys '': an empty path"),
        ([str(small_demo_model), "--api-keys", str(tmp_path)], f"--api-keys: {tmp_path}: a directory"),
        ([str(small_demo_model), "--api-keys", str(tmp_path / "binary")], "bytes that are not UTF-8"),
        ([str(small_demo_model), "--req-limit", "-2"], "--req-limit"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "vanilla_transformer.cli", "serve", *argv],
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = proc.stderr.strip().splitlines()  # (argparse's own refusals print the usage first)
        errors = [line for line in lines if "error:" in line]
        assert proc.returncode == 2 and errors == lines[-1:] and message in lines[-1], proc.stderr[-2000:]


def multipart(fields: dict, filename: str, content: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body of `fields` and one file, as a browser sends it."""
    boundary = "vt-test-boundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: text/plain\r\n\r\n".encode()
        + content
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_one_real_server_for_three_pairs_and_a_pivot_under_32_clients(small_demo_model):
    """`serve DEMO:de-en DEMO:en-de DEMO:en-fr` (the demo model thrice, PyTorch): /languages lists the pairs and the
    pivot (de -> fr through en); the LibreTranslate client, auto-detection, alternatives, HTML and a file; 32
    concurrent clients asking for the pairs in turn get what each model gives alone (nothing mixed between pairs)."""
    pytest.importorskip("lingua")
    from libretranslatepy import LibreTranslateAPI

    from vanilla_transformer.deploy.translators import make_translator

    proc, url = start_server(
        f"{small_demo_model}:de-en", f"{small_demo_model}:en-de", f"{small_demo_model}:en-fr", "--max_wait_ms", "10"
    )
    try:
        client = LibreTranslateAPI(url + "/")
        assert client.languages() == [
            {"code": "de", "name": "German", "targets": ["en", "fr"]},
            {"code": "en", "name": "English", "targets": ["de", "fr"]},
            {"code": "fr", "name": "French", "targets": []},
        ]
        translate = make_translator(small_demo_model, "pytorch", "cpu")
        sources = [pair["src"] for pair in data.make_demo_translation(64, seed=3, max_length=10)["translation"]]
        once = translate(sources)
        twice = translate(once)
        assert client.translate(sources[0], "en", "de") == once[0]
        pairs = [("de", "en"), ("en", "de"), ("en", "fr"), ("de", "fr")]
        calls = [(*pairs[i % 4], i) for i in range(96)]
        with ThreadPoolExecutor(32) as pool:
            answers = list(
                pool.map(
                    lambda call: post_json(
                        url + "/translate", {"q": sources[call[2] % 64], "source": call[0], "target": call[1]}
                    ),
                    calls,
                )
            )
        assert [answer["translatedText"] for answer in answers] == [
            twice[i % 64] if (source, target) == ("de", "fr") else once[i % 64] for source, target, i in calls
        ]
        german = "Ein Mann fährt mit dem Fahrrad durch die Stadt."
        assert client.detect(german)[0]["language"] == "de"
        auto = post_json(
            url + "/translate", {"q": [german, "Two dogs play in the snow."], "source": "auto", "target": "fr"}
        )
        assert [found["language"] for found in auto["detectedLanguage"]] == ["de", "en"]
        english = translate(["Two dogs play in the snow."])[0]
        assert auto["translatedText"] == [translate(translate([german]))[0], english]
        nbest = post_json(url + "/translate", {"q": sources[0], "source": "de", "target": "en", "alternatives": 2})
        assert nbest["translatedText"] == translate([sources[0]], num_beams=3)[0]
        assert len(nbest["alternatives"]) <= 2 and nbest["translatedText"] not in nbest["alternatives"]
        page = post_json(
            url + "/translate", {"q": f"<p>{sources[1]}</p>", "source": "de", "target": "en", "format": "html"}
        )
        assert page["translatedText"] == f"<p>{once[1]}</p>"
        body, content_type = multipart({"source": "de", "target": "en"}, "in.txt", "\n".join(sources[:3]).encode())
        request = urllib.request.Request(url + "/translate_file", data=body, headers={"content-type": content_type})
        with urllib.request.urlopen(request, timeout=60) as response:
            link = json.loads(response.read())["translatedFileUrl"]
        with urllib.request.urlopen(link, timeout=60) as response:
            assert response.read().decode() == "\n".join(once[:3])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
