"""Requests and texts (issue 107, class 5): the bodies a client sends (forms in UTF-8 or another charset, JSON with a
byte-order mark, numbers as strings, booleans, duplicated fields), texts of every shape, markup that is not prose, every
documented field on the real engines, one deadline for a whole request, and CPU-bound work kept off the event loop."""

import gc
import json
import shutil
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
from conftest import FakeEngine, client_for, post_json, start_server, wait_ready  # noqa: E402
from vanilla_transformer.deploy.server.libretranslate import unique, urlencoded_fields, whole_number  # noqa: E402
from vanilla_transformer.deploy.server.markup import rebuild, segments, sentences  # noqa: E402

FORM = "application/x-www-form-urlencoded"


def lt(client, **fields):
    return post(client, "/translate", fields)


def post(client, route: str, body):
    """`body` as JSON, escaped as JSON writes any text (a lone surrogate included)."""
    return client.post(route, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


def refused(response, status: int, *words: str):
    """`response` is `status` with LibreTranslate's error body naming each of `words`."""
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error"} and all(word in response.json()["error"] for word in words), response.text


def test_a_browser_form_in_utf8_is_read_as_utf8_and_another_charset_as_declared():
    """`q=Grüße+aus+Köln` sent as raw UTF-8 (curl, some browsers' fetch), percent-encoded, as a multipart form, and
    in Latin-1 under `charset=latin-1`; JSON in UTF-8 with or without a byte-order mark or a charset label, and in
    the charset its label names where it is not UTF-8: the same text each time. Bytes that are not text in the
    charset named are a 400 naming the field, an unknown charset a 415: never mojibake."""
    with client_for(FakeEngine(reverse=False)) as client:
        wait_ready(client)
        expected = {"translatedText": "en(Grüße aus Köln)"}
        for body, content_type in (
            ("q=Grüße+aus+Köln&source=de&target=en".encode(), FORM),
            (urlencode({"q": "Grüße aus Köln", "source": "de", "target": "en"}).encode(), FORM),
            ("q=Grüße+aus+Köln&source=de&target=en".encode("latin-1"), FORM + "; charset=latin-1"),
            (
                urlencode({"q": "Grüße aus Köln", "source": "de", "target": "en"}, encoding="latin-1").encode(),
                FORM + "; charset=ISO-8859-1",
            ),
            (
                '{"q": "Grüße aus Köln", "source": "de", "target": "en"}'.encode("latin-1"),
                "application/json; charset=latin-1",
            ),
            (
                '{"q": "Grüße aus Köln", "source": "de", "target": "en"}'.encode(),  # JSON is UTF-8, whatever the
                "application/json; charset=latin-1",
            ),  # label says (RFC 8259)
            ('\ufeff{"q": "Grüße aus Köln", "source": "de", "target": "en"}'.encode(), "application/json"),
            ('{"q": "Grüße aus Köln", "source": "de", "target": "en"}'.encode(), "application/json; charset=UTF-8"),
        ):
            answer = client.post("/translate", content=body, headers={"content-type": content_type})
            assert answer.status_code == 200 and answer.json() == expected, (body, content_type, answer.text)
        multipart = client.post(
            "/translate",
            data={"q": "Grüße aus Köln", "source": "de", "target": "en"},
            files={"unused": ("x.txt", b"", "text/plain")},
        )
        assert multipart.json() == expected
        refused(
            client.post(
                "/translate", content="q=Köln&source=de&target=en".encode("latin-1"), headers={"content-type": FORM}
            ),
            400,
            "the form's q field is not UTF-8 text",
        )
        refused(
            client.post(
                "/translate",
                content=b"q=%ED%A0%80&source=de&target=en",  # a lone surrogate, encoded
                headers={"content-type": FORM},
            ),
            400,
            "not UTF-8",
        )
        refused(
            client.post(
                "/translate",
                content="q=Köln&source=de&target=en".encode("latin-1"),
                headers={"content-type": FORM + "; charset=no-such-charset"},
            ),
            415,
            "no-such-charset",
        )
        refused(
            client.post("/translate", content=b"q=a", headers={"content-type": "multipart/form-data"}), 400, "boundary"
        )


@settings(max_examples=200, deadline=None)
@given(data=st.data(), charset=st.sampled_from([None, "utf-8", "UTF-8", "latin-1", "iso-8859-1"]))
def test_any_form_comes_back_as_its_fields(data, charset):
    """Property: a form of any fields, percent-encoded as browsers do (in UTF-8, or in the charset its content type
    names), or sent as raw bytes, parses back to exactly its (name, value) pairs."""
    latin = charset in ("latin-1", "iso-8859-1")
    text = st.text(st.characters(max_codepoint=255) if latin else st.characters(exclude_categories=["Cs"]), max_size=12)
    pairs = data.draw(st.lists(st.tuples(text.filter(bool), text), max_size=5))
    params = {"charset": charset} if charset else {}
    encoding = "latin-1" if latin else "utf-8"
    assert urlencoded_fields(urlencode(pairs, encoding=encoding).encode("ascii"), params) == pairs
    raw = b"&".join(f"{name}={value}".encode(encoding) for name, value in pairs)  # (curl --data without encoding)
    if not any(c in "&=+%" for pair in pairs for c in "".join(pair)):
        assert urlencoded_fields(raw, params) == pairs


def test_fields_of_every_type_are_numbers_texts_or_a_clear_400():
    """`alternatives` as a form's digits or a JSON integer (2.0 too); true, 2.5, "2.5", a list, NaN-like strings and
    a 5,000-digit number are 400s, as are a field given twice with two values, a non-text `format`, and a number
    too long for Python's int (JSON); `q` given twice in a form is a list of texts."""
    with client_for(FakeEngine(), max_beams=4) as client:
        wait_ready(client)
        form = client.post(
            "/translate", content=b"q=ab&source=de&target=en&alternatives=2", headers={"content-type": FORM}
        )
        assert form.json() == {"translatedText": "ba", "alternatives": ["ba #1", "ba #2"]}
        assert lt(client, q="ab", source="de", target="en", alternatives=2.0).json()["alternatives"] == [
            "ba #1",
            "ba #2",
        ]
        assert lt(client, q="ab", source="de", target="en", alternatives=" 1 ").json()["alternatives"] == ["ba #1"]
        for value in (True, False, 2.5, "2.5", "1e2", "NaN", "Infinity", [1], {"n": 1}, "", "٣"):
            refused(lt(client, q="ab", source="de", target="en", alternatives=value), 400, "not a number")
        refused(
            client.post(
                "/translate",
                content=b'{"q": "ab", "source": "de", "target": "en", "alternatives": ' + b"9" * 5000 + b"}",
                headers={"content-type": "application/json"},
            ),
            400,
            "malformed JSON",
        )
        refused(lt(client, q="ab", source="de", target="en", alternatives=10**30), 400, "must be <= 3")
        refused(lt(client, q="ab", source="de", target="en", format=["html"]), 400, "format is not supported")
        refused(
            client.post("/translate", content=b"q=ab&source=de&source=en&target=en", headers={"content-type": FORM}),
            400,
            "source parameter given 2 times",
        )
        assert client.post(
            "/translate", content=b"q=ab&source=de&source=de&target=en", headers={"content-type": FORM}
        ).json() == {"translatedText": "ba"}
        refused(
            client.post(
                "/translate",
                content=b'{"q": "ab", "source": "de", "target": "en", "target": "fr"}',
                headers={"content-type": "application/json"},
            ),
            400,
            "the key 'target' given twice",
        )
        assert client.post(
            "/translate", content=b"q=ab&q=cd&source=de&target=en", headers={"content-type": FORM}
        ).json() == {"translatedText": ["ba", "dc"]}
        for body in (
            {"sentences": ["ab"], "num_beams": True},
            {"sentences": ["ab"], "num_return_sequences": "2"},
            {"sentences": ["ab"], "max_new_tokens": "4"},
            {"sentences": ["ab"], "max_new_tokens": 4.5},
        ):
            refused(client.post("/v1/translate", json=body), 422, "valid integer")
    assert [whole_number(value) for value in (3, "3", "-2", 3.0, 1e300)] == [3, 3, -2, 3, int(1e300)]
    assert {whole_number(value) for value in (True, None, float("nan"), float("inf"), "3_0", "0x3")} == {None}


def test_texts_of_every_shape_are_answered_never_a_500():
    """Blank, whitespace-only, punctuation-only, zero-width and combining-mark texts come back as sent without
    reaching the model; NUL, control, right-to-left and emoji texts are translated; lone surrogates, non-strings, an
    empty list, nested lists and a /detect of nothing are 400s naming the problem."""
    engine = FakeEngine(reverse=False)
    with client_for(engine) as client:
        wait_ready(client)
        for kept in ("   ", "\n\n", "...!?", "\u200b\u200d", "\u0301\u0308", "— – ·"):
            assert lt(client, q=kept, source="de", target="en").json() == {"translatedText": kept}
            assert lt(client, q=kept, source="de", target="en", format="html").json() == {"translatedText": kept}
        assert engine.batches == []
        assert lt(client, q=["", " "], source="de", target="en").json() == {"translatedText": ["", " "]}
        for text in ("a\x00b", "a\x07\x1bb", "שלום עולם", "مرحبا", "a\u202eb", "ok 👍🏽"):
            assert lt(client, q=text, source="de", target="en").json() == {"translatedText": f"en({text})"}
        for body, message in (
            ({"q": "a\ud800"}, "lone surrogate"),
            ({"q": ["a", 1]}, "q must be"),
            ({"q": ["a", ["b"]]}, "q must be"),
            ({"q": []}, "missing q"),
            ({"q": {"text": "a"}}, "q must be"),
            ({"q": None}, "missing q"),
        ):
            refused(lt(client, source="de", target="en", **body), 400, message)
        for body in ({"q": ""}, {"q": []}, {}):
            refused(client.post("/detect", json=body), 400, "missing q")
        refused(post(client, "/detect", {"q": "\udfff"}), 400, "lone surrogate")


def test_a_same_language_pair_passes_text_through_on_both_apis():
    """source == target (a served language) gives the text back on `/translate` and `/v1/translate` alike, without a
    model (a pivot through another language would change it); a language no model serves is a 400 on both."""
    de_en, en_de = FakeEngine(reverse=False), FakeEngine(source="en", target="de", reverse=False)
    with client_for(de_en, en_de) as client:
        wait_ready(client)
        assert lt(client, q=" ab ", source="de", target="de").json() == {"translatedText": " ab "}
        assert client.post(
            "/v1/translate", json={"sentences": ["ab", "", "cd"], "source": "de", "target": "de"}
        ).json() == {"translations": ["ab", "", "cd"]}
        assert client.post(
            "/v1/translate", json={"sentences": ["ab"], "source": "en", "target": "en", "num_return_sequences": 2}
        ).json() == {"translations": [["ab", "ab"]]}
        assert de_en.batches == en_de.batches == []
        refused(lt(client, q="ab", source="xx", target="xx"), 400, "xx is not supported")
        refused(
            client.post("/v1/translate", json={"sentences": ["ab"], "source": "xx", "target": "xx"}),
            400,
            "xx is not supported",
        )


def test_markup_that_is_not_prose_is_never_translated():
    """Code, preformatted text, scripts, styles, templates, comments, CDATA, processing instructions, attributes
    (alt and title too, as LibreTranslate leaves them) and whatever is marked `translate="no"` or `notranslate` stay
    byte for byte; `translate="yes"` inside a `translate="no"` is translated, but never inside code; an unclosed
    `<code>` keeps the rest of the document."""
    with client_for(FakeEngine()) as client:
        wait_ready(client)
        page = (
            '<p title="ab">ab <code>x = 1</code> cd</p><pre>  ab\n  cd</pre><kbd>ab</kbd><template><p>ab</p>'
            "</template><script>ab</script><style>ab{}</style><!-- ab --><![CDATA[ab]]><?ab ?>"
            '<img alt="ab"><div translate="no">ab <b>cd</b> <span translate="yes">ef</span></div>'
            '<p class="x notranslate">ab</p><code><span translate="yes">ab</span></code><p>gh</p>'
        )
        assert lt(client, q=page, source="de", target="en", format="html").json() == {
            "translatedText": (
                '<p title="ab">ba <code>x = 1</code> dc</p><pre>  ab\n  cd</pre><kbd>ab</kbd><template><p>ab</p>'
                "</template><script>ab</script><style>ab{}</style><!-- ab --><![CDATA[ab]]><?ab ?>"
                '<img alt="ab"><div translate="no">ab <b>cd</b> <span translate="yes">fe</span></div>'
                '<p class="x notranslate">ab</p><code><span translate="yes">ab</span></code><p>hg</p>'
            )
        }
        assert lt(client, q="<p>ab</p><code>cd <p>ef", source="de", target="en", format="html").json() == {
            "translatedText": "<p>ba</p><code>cd <p>ef"
        }
        assert lt(client, q="</code></pre>ab<b>cd</i>ef</b>", source="de", target="en", format="html").json() == {
            "translatedText": "</code></pre>ba<b>dc</i>fe</b>"
        }  # end tags of nothing open change nothing


WRAPPERS = st.sampled_from(
    [
        ("<p>", "</p>", True),
        ("<b>", "</b>", True),
        ("<code>", "</code>", False),
        ("<pre>", "</pre>", False),
        ('<span translate="no">', "</span>", False),
        ('<i class="notranslate">', "</i>", False),
        ("<script>", "</script>", False),
        ("<!-- ", " -->", False),
        ("<template><b>", "</b></template>", False),
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(
        st.tuples(WRAPPERS, st.lists(st.sampled_from(["ab", "cd", "x1"]), min_size=1, max_size=3)), max_size=6
    )
)
def test_only_prose_is_handed_to_the_model(parts):
    """Property: a document of prose and of what is not prose, each text "translated" (here upper-cased), changes in
    exactly its prose and nowhere else."""
    document = "".join(f"{start}{' '.join(words)}{end}" for (start, end, _), words in parts)
    expected = "".join(
        f"{start}{' '.join(words).upper() if prose else ' '.join(words)}{end}" for (start, end, prose), words in parts
    )
    pieces = segments(document, "html")
    assert rebuild(pieces, [text.upper() for text in sentences(pieces)]) == expected


def multipart(*parts: tuple[str, str, bytes]) -> bytes:
    """A multipart/form-data body (boundary `b`) of (Content-Disposition parameters, other headers, data) parts."""
    return (
        b"".join(
            f"--b\r\nContent-Disposition: form-data; {disposition}\r\n{headers}\r\n".encode() + data + b"\r\n"
            for disposition, headers, data in parts
        )
        + b"--b--\r\n"
    )


def test_text_that_is_not_unicode_or_a_charset_that_is_not_text_is_a_4xx():
    """A field holding a lone surrogate (JSON's escape, a UTF-7 form, a file name in RFC 2231's UTF-7) is a 400
    naming the field; a charset that is no plain text encoding (punycode, idna, undefined, escapes, UTF-7, base64,
    a NUL in its name) a 415 on every route reading fields, a part's own charset too; and an error quoting text that
    UTF-8 cannot encode is still answered (escaped)."""
    from vanilla_transformer.deploy.server.app import error_response

    assert json.loads(error_response(400, "bad \udc80").body) == {"error": "bad \\udc80"}
    parts = [('name="source"', "", b"de"), ('name="target"', "", b"en")]
    with client_for(FakeEngine()) as client:
        wait_ready(client)
        for field in ("source", "target", "format", "api_key", "\udc80"):
            refused(
                post(client, "/translate", {"q": "ab", "source": "de", "target": "en", field: "\udc80"}),
                400,
                "field holds a lone surrogate (U+DC80)",
            )
        refused(
            post(client, "/translate", {"q": "ab", "source": "de", "target": "en", "format": {"\udc80": 1}}),
            400,
            "the format field holds a lone surrogate",
        )
        refused(
            client.post(
                "/translate_file",
                content=multipart(("name=\"file\"; filename*=utf-7''x.+2AA-", "", b"ab"), *parts),
                headers={"content-type": "multipart/form-data; boundary=b"},
            ),
            400,
            "the file field",
        )
        for charset in ("utf-7", "punycode", "idna", "undefined", "unicode_escape", "base64", "*=''ascii%00"):
            header = f"{FORM}; charset{'' if charset.startswith('*') else '='}{charset}"
            for route in ("/translate", "/detect"):
                refused(
                    client.post(route, content=b"q=Hallo&source=%2B2AA-&target=en", headers={"content-type": header}),
                    415,
                    "unsupported charset",
                )
        refused(
            client.post(
                "/translate",
                content=multipart(('name="q"', "Content-Type: text/plain; charset=punycode\r\n", b"Hallo"), *parts),
                headers={"content-type": "multipart/form-data; boundary=b"},
            ),
            415,
            "punycode",
        )
        refused(
            client.post(
                "/translate_file",
                content=multipart(('name="file"; filename="a.txt"', "", b"ab"), *parts),
                headers={"content-type": "multipart/form-data; boundary=b; charset=undefined"},
            ),
            415,
            "undefined",
        )


def test_any_markup_is_read_in_one_pass_never_an_error():
    """`<![` that opens nothing (html.parser's AssertionError) is a bogus comment, kept; 200 KB of unclosed tags or of
    `<` is read at once (html.parser rescanned an unclosed tag: quadratic), as text, an .html file too."""
    with client_for(FakeEngine()) as client:
        wait_ready(client)
        for page, expected in (("Hallo <![ Welt", "ollaH <![ Welt"), ("x<![x y", "x<![x y")):
            assert lt(client, q=page, source="de", target="en", format="html").json() == {"translatedText": expected}
        answer = client.post(
            "/translate_file",
            data={"source": "de", "target": "en"},
            files={"file": ("a.html", b"ab <![ x", "text/html")},
        )
        assert answer.status_code == 200, answer.text
    for document in ("<a " * 70_000, "<" * 200_000, "<p x='" * 40_000, "<script><!--<script>" * 20_000):
        pieces = segments(document, "html")
        assert rebuild(pieces, sentences(pieces)) == document


@settings(max_examples=300, deadline=None)
@given(
    document=st.lists(st.sampled_from(list("<>!-/?[]'\"= ab\n") + ["CDATA", "script", "p", "&amp;"]), max_size=40).map(
        "".join
    )
)
def test_any_text_as_html_comes_back_as_it_was(document):
    """Property: any text read as HTML never raises, and its pieces, each "translated" to itself, are the text."""
    pieces = segments(document, "html")
    assert rebuild(pieces, sentences(pieces)) == document


def test_what_a_browser_keeps_as_script_style_cdata_or_comment_is_never_changed():
    """A script ends where an HTML5 browser ends it (not at a `</script>` inside `<!--<script>`; at `</script/>`),
    an unclosed comment or CDATA section runs to the end; everything else is translated."""
    for document, expected in (
        ("<script>a<!--<script>b</script>cd</script>ef-->gh", "<script>a<!--<script>b</script>cd</script>EF--&gt;GH"),
        ("<script>ab</script/>cd", "<script>ab</script/>CD"),
        ("<![CDATA[x", "<![CDATA[x"),
        ("<STYLE>ab</style >cd", "<STYLE>ab</style >CD"),
        ("ab<!--cd", "AB<!--cd"),
        ("<!-->ab", "<!-->AB"),
        ("<title>ab</title>cd", "<title>AB</title>CD"),
        ("<p a='x>y'>ab</p>", "<p a='x>y'>AB</p>"),
    ):
        pieces = segments(document, "html")
        assert rebuild(pieces, [text.upper() for text in sentences(pieces)]) == expected, document


def test_query_string_fields_count_as_libretranslates_and_a_key_there_is_never_logged():
    """LibreTranslate reads `request.values`: `?api_key=K&q=...` works, a field of the body wins; uvicorn's access log
    line shows the key as `***` (`RedactedKeys`, however its name is percent-encoded)."""
    import logging

    from vanilla_transformer.deploy.server.libretranslate import RedactedKeys

    with client_for(FakeEngine(), api_key="K") as client:
        wait_ready(client)
        assert client.post("/translate?api_key=K&q=ab&source=de&target=en").json() == {"translatedText": "ba"}
        assert post(client, "/translate?api_key=K&q=ab&source=de&target=en", {"q": "cd"}).json() == {
            "translatedText": "dc"
        }
        refused(client.post("/detect?api_key=L&q=ab"), 403, "Invalid API key")
    for query, shown in (
        ("api_key=K1&q=1", "api_key=***&q=1"),
        ("q=1&api%5Fkey=K1;x", "q=1&api%5Fkey=***"),
        ("api_keys=a&q=api_key", "api_keys=a&q=api_key"),
    ):
        record = logging.LogRecord(
            "uvicorn.access",
            logging.INFO,
            "",
            0,
            '%s - "%s %s HTTP/%s" %d',
            ("127.0.0.1:5", "POST", f"/translate?{query}", "1.1", 200),
            None,
        )
        assert RedactedKeys().filter(record) and record.getMessage().endswith(f'/translate?{shown} HTTP/1.1" 200')


def test_one_request_is_bounded_as_a_whole():
    """--request_timeout bounds a request, not each batch in it: a file of three batches, a pivot through two
    models and a list of texts whose batches each end in time are a 504 in LibreTranslate's error shape when they
    do not end in time together; the server answers the next request."""
    with client_for(FakeEngine(delay=0.4), max_sentences=1, request_timeout=1.0, max_wait_ms=0) as client:
        wait_ready(client)
        late = client.post(
            "/translate_file",
            data={"source": "de", "target": "en"},
            files={"file": ("a.txt", b"ab\ncd\nef\ngh\n", "text/plain")},
        )
        refused(late, 504, "--request_timeout")
        assert lt(client, q="ab", source="de", target="en").json() == {"translatedText": "ba"}
    de_en, en_fr = FakeEngine(delay=0.6, reverse=False), FakeEngine(source="en", target="fr", delay=0.6, reverse=False)
    with client_for(de_en, en_fr, request_timeout=1.0, max_wait_ms=0) as client:
        wait_ready(client)
        refused(lt(client, q="ab", source="de", target="fr"), 504, "no answer within 1 s (--request_timeout)")
        refused(
            client.post("/v1/translate", json={"sentences": ["ab"], "source": "de", "target": "fr"}),
            504,
            "--request_timeout",
        )
        assert client.get("/health").json() == {"status": "ok"}


@pytest.fixture(scope="module")
def engines(small_demo_model, tmp_path_factory):
    """The demo model on both engines: PyTorch, PyTorch with a generation config that names no beams (transformers'
    default: num_beams None), and an int8 CTranslate2 export where ctranslate2 is installed."""
    from vanilla_transformer.deploy.engines import TranslationEngine
    from vanilla_transformer.model_dirs import recognise

    unnamed = shutil.copytree(small_demo_model, tmp_path_factory.mktemp("nobeams") / "model")
    config = json.loads((unnamed / "generation_config.json").read_text())
    config.pop("num_beams", None)
    (unnamed / "generation_config.json").write_text(json.dumps(config))
    found = {"pytorch": recognise(small_demo_model, "pytorch"), "pytorch-no-beams": recognise(unnamed, "pytorch")}
    try:
        import ctranslate2  # noqa: F401

        from vanilla_transformer.deploy.ctranslate2 import export_ctranslate2

        export = export_ctranslate2(small_demo_model, tmp_path_factory.mktemp("ct2") / "int8", quantization="int8")
        found["ctranslate2-int8"] = recognise(export, "ctranslate2")
    except ImportError:
        pass
    loaded = {}
    for name, model in found.items():
        loaded[name] = TranslationEngine(model, "src", "tgt", "cpu")
        loaded[name].open()
    gc.unfreeze()  # (loading froze the collector's view of the test process)
    return loaded


@pytest.mark.parametrize("name", ["pytorch", "pytorch-no-beams", "ctranslate2-int8"])
def test_every_engine_answers_every_documented_field(engines, name):
    """Each engine answers `alternatives` (the n-best, the best left out), `format: html`, `source: auto`, a list of
    texts, `num_beams`, `num_return_sequences` and `max_new_tokens` as that engine's own translation says."""
    if name not in engines:
        pytest.skip("ctranslate2 is not installed")
    engine = engines[name]
    translator = engine.translator
    with client_for(engine) as client:
        wait_ready(client)
        best = translator(["abc12"])[0]
        three = translator.hypotheses(["abc12"], 3)[0]
        answer = lt(client, q="abc12", source="src", target="tgt", alternatives=2)
        assert answer.status_code == 200, answer.text
        assert answer.json()["translatedText"] == three[0]
        assert answer.json()["alternatives"] == unique(three[1:], three[0])[:2]
        assert lt(client, q=["abc12", "<p>abc12</p>"], source="auto", target="tgt", format="html").json() == {
            "translatedText": [best, f"<p>{best}</p>"],
            "detectedLanguage": [{"language": "src", "confidence": 100.0}] * 2,
        }
        nbest = client.post(
            "/v1/translate",
            json={"sentences": ["abc12", ""], "num_beams": 4, "num_return_sequences": 3, "max_new_tokens": 3},
        )
        assert nbest.status_code == 200, nbest.text
        assert nbest.json() == {"translations": [translator.hypotheses(["abc12"], 3, 4, 3)[0], ["", "", ""]]}
        one = client.post("/v1/translate", json={"sentences": ["abc12"], "num_beams": 2})
        assert one.json() == {"translations": translator.hypotheses(["abc12"], 1, 2)[0]}
        long_text = "abc123 " * 1000  # (counted by the tokenizer's thread pool: the same count)
        assert engine.count_tokens([long_text, "ab"]) == [
            len(engine.counter.encode(long_text)),
            len(engine.counter.encode("ab")),
        ]


def test_a_learned_position_table_bounds_what_pytorch_decodes(small_demo_model, tmp_path):
    """A model with learned positions (16 rows) asked for 100 new tokens, or given an input longer than its table,
    decodes within the table as a CTranslate2 export does (at most 15 new tokens, the input cut), never an error; a
    translator made for more new tokens than that is refused naming the limit, as an export's is."""
    import torch

    from vanilla_transformer import VanillaTransformerConfig
    from vanilla_transformer.deploy.translators import make_translator
    from vanilla_transformer.model.modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

    config = VanillaTransformerConfig.from_pretrained(small_demo_model)
    config.position_embedding_type, config.max_position_embeddings = "learned", 16
    torch.manual_seed(0)
    VanillaTransformerForConditionalGeneration(config).save_pretrained(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(small_demo_model / name, tmp_path / name)
    translator = make_translator(tmp_path, "pytorch", "cpu")
    assert translator.hypotheses(["abc"], 2, max_new_tokens=100) == translator.hypotheses(["abc"], 2, 2, 15)
    with pytest.raises(ValueError, match="--max_new_tokens 16 is over this model's limit of 15 new tokens"):
        make_translator(tmp_path, "pytorch", "cpu", max_new_tokens=16)  # (the commands: asked for explicitly)
    assert len(translator(["abc12" * 40])) == 1


def timed_get(url: str) -> float:
    start = time.monotonic()
    with urllib.request.urlopen(url, timeout=60) as response:
        assert response.status == 200
    return time.monotonic() - start


def test_cpu_bound_requests_never_stop_the_server_answering(small_demo_model):
    """A real server (uvicorn) detecting the language of one 400,000-character word (lingua: about a minute whole),
    counting the tokens of a text of 1,000,000 characters and parsing an HTML document of 440 kB: /health answers
    throughout, each time within a bound far under what any of that work takes on the event loop."""
    pytest.importorskip("lingua")
    proc, url = start_server(f"{small_demo_model}:de-en", f"{small_demo_model}:en-de", "--max_request_bytes", "4000000")
    answers: dict = {}

    def send(name, route, body):
        try:
            answers[name] = post_json(url + route, body, timeout=120)
        except urllib.error.HTTPError as error:
            answers[name] = error.code

    try:
        work = [
            threading.Thread(target=send, args=args)
            for args in (
                ("detect", "/detect", {"q": "a" * 400_000}),
                ("count", "/translate", {"q": "b" * 1_000_000, "source": "de", "target": "en"}),
                (
                    "html",
                    "/translate",
                    {"q": "<p>ab <b>cd</b> ef</p>" * 20_000, "source": "de", "target": "en", "format": "html"},
                ),
            )
        ]
        for thread in work:
            thread.start()
        waits = []
        while any(thread.is_alive() for thread in work) or not waits:
            waits.append(timed_get(url + "/health"))
            time.sleep(0.05)
        for thread in work:
            thread.join()
        assert answers["detect"][0]["language"] in ("de", "en") and answers["count"] == 400
        assert answers["html"] == 413  # (60,000 text nodes: over --max_sentences, once they are found)
        assert max(waits) < 5.0, waits
    finally:
        proc.terminate()
        proc.wait(timeout=30)
