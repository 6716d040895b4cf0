"""LibreTranslate in production: its options from LT_* variables, the URL prefix, /metrics behind a token, the
switches, request limits per minute / hour / day with the flood ban and X-Forwarded-For, limits shared through a real
Redis by two servers, and office documents through /translate_file."""

import io
import json
import logging
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
from conftest import FakeEngine, client_for, start_server, wait_ready  # noqa: E402
from vanilla_transformer.commands import serve  # noqa: E402
from vanilla_transformer.deploy.server.documents import DOCUMENTS, distribute, sentence_lines  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def lt(client, headers=None, **fields):
    return client.post("/translate", json={"source": "de", "target": "en", "q": "ab", **fields}, headers=headers)


# ------------------------------------------------------------------------------------------------ configuration
def test_every_option_from_its_lt_variable_and_the_flag_wins():
    env = {
        "LT_CHAR_LIMIT": "5",
        "LT_METRICS": "true",
        "LT_URL_PREFIX": "tr/",
        "LT_REQ_LIMIT": "7",
        "LT_CORS_ORIGINS": "https://a.example,https://b.example",
        "LT_MAX_QUEUE": "9",
        "LT_DISABLE_WEB_UI": "0",
    }
    args = serve.parse_args(["m"], env)
    assert (args.char_limit, args.metrics, args.url_prefix, args.req_limit, args.max_queue) == (5, True, "/tr", 7, 9)
    assert args.cors_origins == ["https://a.example", "https://b.example"] and args.disable_web_ui is False
    assert serve.parse_args(["m", "--char-limit", "8", "--req_limit", "1"], env).char_limit == 8  # the flag wins
    assert serve.parse_args(["m"], {}).char_limit == -1 and serve.parse_args(["m"], {}).metrics is False
    for variable, value, message in (
        ("LT_CHAR_LIMIT", "many", "LT_CHAR_LIMIT='many'"),
        ("LT_METRICS", "maybe", "expected true or false"),
        ("LT_ENGINE", "tf", "expected one of auto, pytorch, ctranslate2"),
        ("LT_PORT", "70000", "LT_PORT='70000'"),
    ):
        with pytest.raises(ValueError, match=message):
            serve.parse_args(["m"], {variable: value})
    with pytest.raises(ValueError, match="--url-prefix 'a b'"):
        serve.parse_args(["m", "--url-prefix", "a b"], {})
    assert serve.limits(serve.parse_args(["m"], {"LT_API_KEYS": "false"}))["api_keys"] == {}  # LibreTranslate's switch
    with pytest.raises(ValueError, match="give the key file"):
        serve.limits(serve.parse_args(["m"], {"LT_API_KEYS": "true"}))


def test_the_options_table_names_every_option_and_its_variable():
    """docs/serving.md's options table: one row per option the server takes, its LT_* variable, its default as the
    code has it; and LibreTranslate's options we do not take are said."""
    text = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1].startswith("`LT_"):
            rows[cells[0].split("`")[1].split(",")[0].strip()] = (cells[1].strip("`"), cells[2])
    parser = serve.build_parser()
    options = [action for action in parser.options if action.option_strings and action.dest != "help"]
    for action in options:
        flag = action.option_strings[0]
        assert flag in rows, f"docs/serving.md's options table has no row for {flag}"
        variable, default = rows[flag]
        assert variable == "LT_" + action.dest.upper(), flag
        if action.nargs != 0 and action.default not in (None, [], "") and flag != "--api_key":
            assert f"`{action.default}`" in default, f"{flag}: the table says {default}, the code {action.default}"
    assert set(rows) == {action.option_strings[0] for action in options}
    for unsupported in serve.NOT_TAKEN:
        assert f"`{unsupported}`" in text, f"docs/serving.md does not say we refuse {unsupported}"
        with pytest.raises(ValueError, match=f"{unsupported} is LibreTranslate's and not taken here: "):
            serve.parse_args(["m", f"{unsupported}=1"], {})


# ------------------------------------------------------------------------------------------------ routes and switches
def test_url_prefix_serves_every_route_under_it():
    with client_for(FakeEngine(), url_prefix="/tr") as client:
        for _ in range(200):
            if client.get("/tr/health").status_code == 200:
                break
        assert lt(client).status_code == 404
        assert client.post("/tr/translate", json={"q": "ab", "source": "de", "target": "en"}).json() == {
            "translatedText": "ba"
        }
        root = client.get("/", follow_redirects=False)
        assert root.status_code == 301 and root.headers["location"] == "/tr/"
        assert client.get("/tr/").status_code == 200 and "<title>" in client.get("/tr/").text
        answer = client.post(
            "/tr/translate_file", data={"source": "de", "target": "en"}, files={"file": ("a.txt", b"ab", "text/plain")}
        ).json()
        assert answer["translatedFileUrl"].startswith("http://testserver/tr/download_file/")
        assert client.get(answer["translatedFileUrl"].removeprefix("http://testserver")).content == b"ba"
        assert 'path="/tr/translate",status="200"' in client.get("/tr/metrics").text


def test_metrics_are_off_by_default_and_behind_the_token_when_given():
    with client_for(FakeEngine(), metrics=False) as client:
        assert client.get("/metrics").status_code == 404
    with client_for(FakeEngine(), metrics_auth_token="s3cret") as client:
        assert client.get("/metrics").status_code == 401 and client.get("/metrics").json() == {"error": "Unauthorized"}
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        answer = client.get("/metrics", headers={"Authorization": "Bearer s3cret"})
        assert answer.status_code == 200 and "vt_requests_total" in answer.text


def test_web_ui_and_files_translation_switches():
    with client_for(FakeEngine()) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'id="translate-file"' in page.text and "<script" in page.text
    with client_for(FakeEngine(), disable_web_ui=True, disable_files_translation=True) as client:
        wait_ready(client)
        assert client.get("/").status_code == 404 and "error" in client.get("/").json()
        refused = client.post(
            "/translate_file", data={"source": "de", "target": "en"}, files={"file": ("a.txt", b"ab", "text/plain")}
        )
        assert refused.status_code == 403 and refused.json() == {
            "error": "Files translation are disabled on this server."
        }
        assert client.get("/download_file/x.a.txt").status_code == 403
        shown = client.get("/frontend/settings").json()
        assert shown["filesTranslation"] is False and shown["supportedFilesFormat"] == []
        assert lt(client).status_code == 200  # text still translates


# ------------------------------------------------------------------------------------------------ request limits
def test_hourly_and_daily_limits_and_the_flood_ban():
    with client_for(FakeEngine(), hourly_req_limit=3) as client:
        wait_ready(client)
        assert [lt(client).status_code for _ in range(3)] == [200] * 3
        slow = lt(client)
        assert slow.status_code == 429 and slow.json() == {"error": "Slowdown: 3 per 1 hour"}
        assert 3000 < int(slow.headers["retry-after"]) <= 3600
    with client_for(FakeEngine(), daily_req_limit=1, req_limit=5) as client:
        wait_ready(client)
        assert lt(client).status_code == 200 and lt(client).json() == {"error": "Slowdown: 1 per 1 day"}
    with client_for(FakeEngine(), req_limit=1, req_flood_threshold=2) as client:
        wait_ready(client)
        statuses = [lt(client).status_code for _ in range(4)]
        assert statuses == [200, 429, 429, 403], statuses  # two offences: banned
        assert lt(client).json() == {"error": "Too many request limits violations"}
        assert client.get("/languages").status_code == 200  # what LibreTranslate leaves open stays open


def test_forwarded_for_is_the_client_only_when_trusted():
    """Trusted, the client is the hop the proxy added: the last address of X-Forwarded-For (tests/test_proxy.py: the
    same through a real nginx)."""
    with client_for(FakeEngine(), req_limit=1) as client:
        wait_ready(client)
        assert lt(client, headers={"X-Forwarded-For": "10.0.0.1"}).status_code == 200
        assert lt(client, headers={"X-Forwarded-For": "10.0.0.2"}).status_code == 429  # one client: the proxy
    with client_for(FakeEngine(), req_limit=1, trust_forwarded_for=True) as client:
        wait_ready(client)
        assert lt(client, headers={"X-Forwarded-For": "172.16.0.9, 10.0.0.1"}).status_code == 200
        assert lt(client, headers={"X-Forwarded-For": "10.0.0.2"}).status_code == 200
        assert lt(client, headers={"X-Forwarded-For": "172.16.0.7, 10.0.0.1"}).status_code == 429  # forged left part
        assert lt(client).status_code == 200  # no header: the connection's address


def test_redis_shares_limits_between_servers_and_restarts(redis_url, redis_server, caplog):
    """Two apps (two workers) on one Redis count together; a third started later (a restart) still sees the counts;
    Redis gone: a log line and 503, not 500."""
    first = client_for(FakeEngine(), req_limit=3, req_limit_storage=redis_url)
    second = client_for(FakeEngine(), req_limit=3, req_limit_storage=redis_url)
    with first, second:
        wait_ready(first)
        wait_ready(second)
        assert [lt(client).status_code for client in (first, second, first)] == [200] * 3
        assert lt(second).status_code == 429 and lt(first).json() == {"error": "Slowdown: 3 per 1 minute"}
    with client_for(FakeEngine(), req_limit=3, req_limit_storage=redis_url) as restarted:
        wait_ready(restarted)
        assert lt(restarted).status_code == 429
    with client_for(FakeEngine(), req_limit=3, req_limit_storage="redis://127.0.0.1:1/0") as down:
        wait_ready(down)
        with caplog.at_level(logging.ERROR, logger="vanilla_transformer.deploy.server.access"):
            answers = [lt(down) for _ in range(2)]
        assert [a.status_code for a in answers] == [503, 503] and "limit storage" in answers[0].json()["error"]
        assert sum("cannot be reached" in r.getMessage() for r in caplog.records) == 1  # one line, not one a request
        assert down.get("/languages").status_code == 200


def test_two_servers_on_one_redis_hold_the_limit_exactly_under_32_clients(
    small_demo_model, redis_url, tmp_path, monkeypatch
):
    """scripts/load_test.py, 32 clients over two real `serve` processes on one Redis, the limit from
    LT_DAILY_REQ_LIMIT: of 160 requests exactly the limit's 40 are translated, every other one is a 429, nothing else
    fails; a restarted server still refuses."""
    import runpy
    import urllib.error
    import urllib.request

    monkeypatch.setenv("LT_DAILY_REQ_LIMIT", "40")
    servers = [start_server(small_demo_model, "--req-limit-storage", redis_url) for _ in range(2)]
    try:
        sentences = tmp_path / "sentences.txt"
        sentences.write_text("ein Hund\nzwei Katzen im Schnee\n", encoding="utf-8")
        load_test = runpy.run_path(str(ROOT / "scripts" / "load_test.py"))
        assert (
            load_test["main"](
                [
                    "--url",
                    servers[0][1],
                    servers[1][1],
                    "--input",
                    str(sentences),
                    "--concurrency",
                    "32",
                    "--requests",
                    "160",
                    "--output",
                    str(tmp_path / "load.json"),
                ]
            )
            == 0
        )
        (row,) = json.loads((tmp_path / "load.json").read_text())
        assert row["statuses"] == {"200": 40, "429": 120}, row
        proc, _ = servers.pop()
        proc.terminate()
        proc.wait(timeout=30)
        servers.append(start_server(small_demo_model, "--req-limit-storage", redis_url))
        request = urllib.request.Request(
            servers[1][1] + "/v1/translate",
            data=b'{"sentences": ["ein Hund"]}',
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 429
    finally:
        for proc, _ in servers:
            proc.terminate()
            proc.wait(timeout=30)


def test_an_unreachable_redis_is_an_error_line_before_serving(small_demo_model):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vanilla_transformer.cli",
            "serve",
            str(small_demo_model),
            "--req-limit-storage",
            "redis://:pw@127.0.0.1:1/0",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--req-limit-storage redis://127.0.0.1:1/0: cannot reach Redis" in proc.stderr and "pw" not in proc.stderr


# ------------------------------------------------------------------------------------------------ documents
@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab cd\u00e9", max_size=40), sizes=st.lists(st.integers(0, 30), min_size=1, max_size=6))
def test_a_translation_is_cut_into_the_runs_whole(text, sizes):
    """Property: the pieces are as many as the runs and give the translation back; no word is split."""
    pieces = distribute(text, sizes)
    assert len(pieces) == len(sizes) and "".join(pieces) == text
    assert sum(len(piece.split()) for piece in pieces) == len(text.split())


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab Dr.!?“Ä 3\t", max_size=40))
def test_cutting_sentences_only_turns_spaces_into_line_breaks(text):
    import re

    lines = sentence_lines(text)
    assert re.sub(r"\s+", " ", lines) == re.sub(r"\s+", " ", text)
    assert all(line.strip() for line in lines.split("\n")[:-1])  # no empty sentence between two breaks


def test_paragraphs_are_cut_into_sentences_not_after_abbreviations():
    assert (
        sentence_lines("Ein Hund läuft. Zwei Katzen! Warum? „Ja“, sagte er.")
        == "Ein Hund läuft.\nZwei Katzen!\nWarum?\n„Ja“, sagte er."
    )
    assert (
        sentence_lines("Dr. Müller kam am 3. Mai, z.B. um acht. dann nicht.")
        == "Dr. Müller kam am 3. Mai, z.B. um acht. dann nicht."
    )


def translate_document(client, name: str, data: bytes, **fields):
    answer = client.post(
        "/translate_file",
        data={"source": "de", "target": "en", **fields},
        files={"file": (name, data, "application/octet-stream")},
    )
    assert answer.status_code == 200, answer.text
    download = client.get(answer.json()["translatedFileUrl"].removeprefix("http://testserver"))
    assert download.status_code == 200
    return download.content


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    paragraph = document.add_paragraph("Ein ")
    paragraph.add_run("schwarzer").bold = True
    paragraph.add_run(" Hund")
    document.add_heading("Titel hier", level=1)
    table = document.add_table(rows=1, cols=1)
    table.cell(0, 0).text = "Zelle eins"
    document.add_paragraph("")
    document.add_paragraph("Ein Hund. Eine Katze.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_docx_is_translated_run_by_run_with_its_formatting():
    docx = pytest.importorskip("docx")
    with client_for(FakeEngine()) as client:
        wait_ready(client)
        result = docx.Document(io.BytesIO(translate_document(client, "brief.docx", docx_bytes())))
    first = result.paragraphs[0]
    assert first.text == "dnuH rezrawhcs niE"  # the paragraph, translated whole (FakeEngine: reversed)
    assert len(first.runs) == 3 and [run.bold for run in first.runs] == [None, True, None]
    assert result.paragraphs[1].text == "reih letiT" and result.paragraphs[1].style.name == "Heading 1"
    assert result.tables[0].cell(0, 0).text == "snie elleZ"
    assert result.paragraphs[-1].text == ".dnuH niE .eztaK eniE"  # sentence by sentence


def test_pptx_odt_odp_epub_and_srt_open_in_their_libraries():
    pptx = pytest.importorskip("pptx")
    pytest.importorskip("odf")
    epub = pytest.importorskip("ebooklib.epub")
    from odf import opendocument, teletype, text

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = "Guten Tag"
    body = slide.placeholders[1].text_frame.paragraphs[0]
    body.text = "Zwei "
    run = body.add_run()
    run.text = "Katzen"
    run.font.italic = True
    packed = io.BytesIO()
    presentation.save(packed)

    def odf_bytes(document):
        paragraph = text.P(text="Ein ")
        span = text.Span(text="roter")
        paragraph.addElement(span)
        paragraph.addText(" Ball")
        if document.mimetype.endswith("presentation"):  # a slide with a text box
            from odf import draw, style

            layout = style.PageLayout(name="layout")
            master = style.MasterPage(name="Default", pagelayoutname=layout)
            document.automaticstyles.addElement(layout)
            document.masterstyles.addElement(master)
            page = draw.Page(masterpagename=master)
            frame = draw.Frame(width="20cm", height="5cm", x="1cm", y="1cm")
            box = draw.TextBox()
            box.addElement(paragraph)
            frame.addElement(box)
            page.addElement(frame)
            document.presentation.addElement(page)
        else:
            document.text.addElement(paragraph)
        out = io.BytesIO()
        document.write(out)
        return out.getvalue()

    book = epub.EpubBook()
    book.set_identifier("id1")
    book.set_title("Buch")
    chapter = epub.EpubHtml(title="Eins", file_name="one.xhtml", lang="de")
    chapter.content = "<html><body><h1>Kapitel eins</h1><p>Ein <em>kleines</em> Haus</p></body></html>"
    book.add_item(chapter)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = [chapter]
    book_path = io.BytesIO()
    epub.write_epub(book_path, book)
    subtitles = (
        "1\r\n00:00:01,000 --> 00:00:02,500\r\nZwei Hunde\r\nim Schnee\r\n\r\n2\r\n00:00:03,000 --> "
        "00:00:04,000\r\nJa\r\n"
    )

    with client_for(FakeEngine()) as client:
        wait_ready(client)
        slides = pptx.Presentation(io.BytesIO(translate_document(client, "talk.pptx", packed.getvalue())))
        odt = translate_document(client, "a.odt", odf_bytes(opendocument.OpenDocumentText()))
        odp = translate_document(client, "a.odp", odf_bytes(opendocument.OpenDocumentPresentation()))
        book_out = translate_document(client, "b.epub", book_path.getvalue())
        srt = translate_document(client, "s.srt", subtitles.encode())
    shapes = slides.slides[0].shapes
    assert shapes.title.text == "gaT netuG"
    runs = shapes.placeholders[1].text_frame.paragraphs[0].runs
    assert "".join(r.text for r in runs) == "neztaK iewZ" and len(runs) == 2 and runs[1].font.italic is True
    for packed_odf in (odt, odp):
        document = opendocument.load(io.BytesIO(packed_odf))
        (paragraph,) = document.getElementsByType(text.P)
        assert teletype.extractText(paragraph) == "llaB retor niE"
        assert len(document.getElementsByType(text.Span)) == 1  # the span (its formatting) is kept
        assert zipfile.ZipFile(io.BytesIO(packed_odf)).infolist()[0].filename == "mimetype"
    read = epub.read_epub(io.BytesIO(book_out))
    (chapter,) = [item for item in read.get_items() if item.get_name() == "one.xhtml"]
    content = chapter.get_content().decode()
    assert "<h1>snie letipaK</h1>" in content and "<p>suaH <em>senielk </em>niE</p>" in content, content
    lines = srt.decode().split("\r\n")  # numbers and timings kept, each subtitle over its own two lines
    assert (
        lines[:2] == ["1", "00:00:01,000 --> 00:00:02,500"]
        and len(lines) == 9
        and lines[4:] == ["", "2", "00:00:03,000 --> 00:00:04,000", "aJ", ""]
    )
    assert " ".join(lines[2:4]) == "eenhcS mi ednuH iewZ" and all(lines[2:4])


def zip_of(parts: dict, compression=zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as packed:
        for name, data in parts.items():
            packed.writestr(name, data)
    return out.getvalue()


def test_hostile_documents_are_400s_in_libretranslates_shape():
    pytest.importorskip("docx")
    good = docx_bytes()
    parts = {
        info.filename: zipfile.ZipFile(io.BytesIO(good)).read(info)
        for info in zipfile.ZipFile(io.BytesIO(good)).infolist()
    }
    cases = [
        ("cut.docx", good[: len(good) // 2], "a damaged document"),
        ("locked.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512, "encrypted (password-protected)"),
        ("bomb.docx", zip_of({**parts, "word/media/zeros.bin": b"\0" * (70 << 20)}), "a zip bomb?"),
        ("macros.docx", zip_of({**parts, "word/vbaProject.bin": b"VBA"}), "holds macros"),
        ("xml.docx", zip_of({**parts, "word/document.xml": b"<w:document"}), "word/document.xml"),
        ("empty.docx", zip_of({"a.txt": b"x"}), "no .docx content"),
        (
            "entity.docx",
            zip_of(
                {
                    **parts,
                    "word/document.xml": b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a '
                    b'SYSTEM "file:///etc/passwd">]><d>&a;</d>',
                }
            ),
            None,
        ),
        ("bad.srt", b"1\n00:00:01,000 -> 00:00:02,000\nJa\n", "line 2: expected a timing"),
        ("bad2.srt", b"Hallo\n", "line 1: expected a subtitle number"),
        ("latin.srt", "1\n00:00:01,000 --> 00:00:02,000\nJa \xe4\n".encode("latin-1"), "not UTF-8 text"),
    ]
    with client_for(FakeEngine(), max_request_bytes=8 << 20) as client:
        wait_ready(client)
        for name, data, message in cases:
            answer = client.post(
                "/translate_file",
                data={"source": "de", "target": "en"},
                files={"file": (name, data, "application/octet-stream")},
            )
            if message is None:  # an external entity is never resolved: the file's text is not in the document
                if answer.status_code == 200:
                    out = client.get(answer.json()["translatedFileUrl"].removeprefix("http://testserver")).content
                    assert b"root:" not in zipfile.ZipFile(io.BytesIO(out)).read("word/document.xml")
                continue
            assert answer.status_code == 400 and set(answer.json()) == {"error"}, (name, answer.text)
            assert (
                answer.json()["error"].startswith(f"Invalid request: {name}: ") and message in answer.json()["error"]
            ), (name, answer.json())
        big = client.post(
            "/translate_file",
            data={"source": "de", "target": "en"},
            files={"file": ("big.docx", b"\0" * (9 << 20), "application/octet-stream")},
        )
        assert big.status_code == 413 and "error" in big.json()
    assert set(DOCUMENTS) == {".docx", ".pptx", ".odt", ".odp", ".epub", ".srt"}


# ------------------------------------------------------------------------------------------------ the page
@pytest.fixture
def page_server():
    """A real server (uvicorn in a thread) for two fake pairs under a URL prefix: its page's URL."""
    import threading
    import time

    import uvicorn

    from conftest import free_port
    from vanilla_transformer.deploy.server.app import Settings, create_app

    engines = [FakeEngine(), FakeEngine(source="en", target="de", reverse=False)]
    app = create_app(engines, Settings(url_prefix="/tr", char_limit=50, frontend_timeout=60_000))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/tr/"
    server.should_exit = True
    thread.join(timeout=30)


def test_the_page_in_a_browser_translates_text_auto_and_a_file(page_server, tmp_path):
    import urllib.request

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    from conftest import chrome, wait_for

    browser = chrome()
    try:
        browser.get(page_server)
        wait_for(lambda: browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready"), what="the page")
        find = browser.find_element
        value = lambda element_id: find(By.ID, element_id).get_attribute("value")  # noqa: E731
        assert Select(find(By.ID, "source")).first_selected_option.get_attribute("value") == "de"
        assert [o.get_attribute("value") for o in Select(find(By.ID, "target")).options] == ["en"]
        box = find(By.ID, "text")
        box.send_keys("Hallo Welt")
        assert find(By.ID, "chars").text == "10 / 50"
        box.send_keys(Keys.CONTROL, Keys.ENTER)  # (typing alone waits frontend_timeout: 60 s here)
        wait_for(lambda: value("translation") == "tleW ollaH", what="the translation")
        Select(find(By.ID, "alternatives-count")).select_by_value("2")
        wait_for(
            lambda: (
                [li.text for li in find(By.ID, "alternatives").find_elements(By.TAG_NAME, "li")]
                == ["tleW ollaH #1", "tleW ollaH #2"]
            ),
            what="the alternatives",
        )
        Select(find(By.ID, "alternatives-count")).select_by_value("0")
        Select(find(By.ID, "source")).select_by_value("en")  # targets follow the source
        assert [o.get_attribute("value") for o in Select(find(By.ID, "target")).options] == ["de"]
        wait_for(lambda: value("translation") == "de(Hallo Welt)", what="the en -> de translation")
        find(By.ID, "swap").click()  # en -> de becomes de -> en, the translation the new text
        wait_for(
            lambda: value("text") == "de(Hallo Welt)" and value("translation") == ")tleW ollaH(ed",
            what="the swapped translation",
        )
        Select(find(By.ID, "source")).select_by_value("auto")
        wait_for(lambda: find(By.ID, "detected").text.startswith("Detected: "), what="the detected language")
        box.send_keys("x" * 45)
        assert "over" in find(By.ID, "chars").get_attribute("class")  # past the char limit: marked
        box.send_keys(Keys.CONTROL, Keys.ENTER)
        wait_for(lambda: "exceeds text limit (50)" in find(By.ID, "status").text, what="the server's error")
        notes = tmp_path / "notes.txt"
        notes.write_bytes(b"ab\ncd\n")
        Select(find(By.ID, "source")).select_by_value("de")
        find(By.ID, "file").send_keys(str(notes))
        find(By.ID, "translate-file").click()
        link = wait_for(
            lambda: find(By.ID, "download").is_displayed() and find(By.ID, "download"), what="the download link"
        )
        assert link.get_attribute("download") == "notes.txt"
        with urllib.request.urlopen(link.get_attribute("href")) as response:
            assert response.read() == b"ba\ndc\n"
    finally:
        browser.quit()
