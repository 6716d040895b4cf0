"""PDF documents through `/translate_file` (the `pdf` extra): a PDF made here with reportlab (two pages, text boxes,
an image, an inline image, vector graphics) translated and reopened in pdfium (pypdfium2, another library than the
pypdf that writes it): the same pages, the translated text extractable where the original stood, images and
graphics kept. Hostile PDFs by class (another format, garbage, cut, damaged, encrypted, a page-count bomb, too many
objects, a decompression bomb) are 400s in LibreTranslate's shape naming the problem; active content (JavaScript,
OpenAction, additional actions, launch actions, embedded files, attachments) never reaches the result; any bytes and
any damage to a valid PDF are a 400 or a translation, never a 500 or a hang."""

import io
import re
import time
import zlib
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
pypdf = pytest.importorskip("pypdf", reason="the pdf extra is not installed (pip install -e .[pdf])")
pdfium = pytest.importorskip("pypdfium2")
pytest.importorskip("reportlab")
from test_documents import answer_to, png, refused  # noqa: E402
from test_libretranslate_production import docx_bytes, translate_document  # noqa: E402

from conftest import FakeEngine, client_for, wait_ready  # noqa: E402
from vanilla_transformer.deploy.server import documents, pdf  # noqa: E402

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
PARAGRAPH = ["Ein roter Ball liegt im Garten.", "Der Hund spielt gern damit.", "Die Kinder lachen laut."]


def reportlab_pdf() -> bytes:
    """Two A4 pages: a heading, a paragraph of three lines, an image and a filled rectangle on the first; a red
    paragraph beside another and an inline image on the second."""
    from PIL import Image
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    out = io.BytesIO()
    page = canvas.Canvas(out, pagesize=(595, 842))
    page.setFont("Helvetica-Bold", 18)
    page.drawString(72, 760, "Guten Tag")
    text = page.beginText(72, 720)
    text.setFont("Helvetica", 11)
    for line in PARAGRAPH:
        text.textLine(line)
    page.drawText(text)
    page.drawImage(ImageReader(io.BytesIO(png())), 72, 500, width=100, height=100)
    page.setFillColorRGB(0.2, 0.4, 0.8)
    page.rect(300, 500, 120, 60, fill=1)
    page.showPage()
    page.setFillColorRGB(0.8, 0, 0)
    page.setFont("Helvetica", 12)
    page.drawString(72, 700, "Links steht ein Haus.")
    page.drawString(330, 700, "Rechts steht ein Baum.")
    page.drawInlineImage(Image.open(io.BytesIO(png())), 72, 400, width=50, height=50)
    page.showPage()
    page.save()
    return out.getvalue()


def raw_pdf(*objects: bytes, trailer: bytes = b"") -> bytes:
    """A PDF of these objects (numbered from 1; 1 the catalog), with a correct cross-reference table."""
    out, offsets = b"%PDF-1.7\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    table = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    size = len(objects) + 1
    return out + b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (size, trailer, table)


def stream(data: bytes, extra: bytes = b"") -> bytes:
    packed = zlib.compress(data)
    return b"<< /Length %d /Filter /FlateDecode %s>>\nstream\n%s\nendstream" % (len(packed), extra, packed)


def one_page(content: bytes, *more: bytes) -> bytes:
    """A PDF of one page showing `content` (Helvetica as /F1), and `more` objects after it (numbered from 6)."""
    return raw_pdf(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 300] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        stream(content),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        *more,
    )


@pytest.fixture(scope="module")
def sample() -> bytes:
    return reportlab_pdf()


@pytest.fixture(scope="module")
def client():
    with client_for(FakeEngine(), max_request_bytes=8 << 20) as test_client:
        wait_ready(test_client)
        yield test_client


@contextmanager
def reopened(data: bytes):
    """`data` opened in PDFium (closed after)."""
    document = pdfium.PdfDocument(data)
    try:
        yield document
    finally:
        document.close()


def objects_of(document: pdfium.PdfDocument, page: int, kind: int) -> int:
    return len(list(document[page].get_objects(filter=[kind])))


def text_in(document: pdfium.PdfDocument, page: int, box: tuple | None = None) -> str:
    found = document[page].get_textpage()
    return " ".join((found.get_text_bounded(*box) if box else found.get_text_range()).split())


# ------------------------------------------------------------------------------------------------ translating
def pages_alike(before: pdfium.PdfDocument, after: pdfium.PdfDocument) -> None:
    """`after` is `before` translated (FakeEngine: each sentence reversed) in place, its images and graphics kept."""
    import pypdfium2.raw as raw

    assert len(after) == len(before) == 2
    assert [after[n].get_size() for n in range(2)] == [before[n].get_size() for n in range(2)]
    first = text_in(after, 0)
    assert "gaT netuG" in first and " ".join(line[::-1] for line in PARAGRAPH) in first  # (FakeEngine: reversed)
    assert "Guten" not in first and "Ball" not in first  # the original text is gone, not hidden
    assert "gaT netuG" in text_in(after, 0, (60, 750, 300, 790))  # the heading's box
    assert "netraG mi tgeil" in text_in(after, 0, (60, 680, 400, 740))  # the paragraph's
    second = text_in(after, 1)
    assert "suaH nie thets skniL" in text_in(after, 1, (60, 690, 320, 720)) and "Links" not in second
    assert "muaB nie thets sthceR" in text_in(after, 1, (320, 690, 560, 720))
    for page in range(2):  # images (an XObject, an inline image) and vector graphics kept
        for kind in (raw.FPDF_PAGEOBJ_IMAGE, raw.FPDF_PAGEOBJ_PATH):
            assert objects_of(after, page, kind) == objects_of(before, page, kind), (page, kind)
    assert objects_of(after, 0, raw.FPDF_PAGEOBJ_IMAGE) == 1 == objects_of(after, 1, raw.FPDF_PAGEOBJ_IMAGE)


def test_a_pdf_is_translated_where_its_text_stood_and_opens_in_another_library(client, sample):
    out = translate_document(client, "brief.pdf", sample)
    with reopened(sample) as before, reopened(out) as after:
        pages_alike(before, after)
    pictures = [
        [image.get_object().get_data() for image in page["/Resources"]["/XObject"].values()]
        for page in (pypdf.PdfReader(io.BytesIO(data)).pages[0] for data in (sample, out))
    ]
    assert pictures[0] == pictures[1] and len(pictures[0]) == 1  # the image's bytes, untouched


def test_the_boxes_a_pdf_is_read_into(sample):
    texts, write = pdf.read_pdf(sample)
    assert texts == ["Guten Tag", " ".join(PARAGRAPH), "Links steht ein Haus.", "Rechts steht ein Baum."]
    out = pypdf.PdfReader(io.BytesIO(write(["Good day", "A long translation. " * 30, "Left", "Right"])))
    first = " ".join(out.pages[0].extract_text().split())
    assert first.startswith("Good day A long translation.") and first.count("translation") == 30  # shrunk, all kept
    fonts = {font["/BaseFont"] for font in out.pages[0]["/Resources"]["/Font"].values()}
    assert {"/Helvetica-Bold", "/Helvetica"} <= fonts  # (the heading bold, as it was)


def test_lines_are_grouped_into_paragraphs_and_list_items():
    """A paragraph's indented first line starts a box, as a list item's bullet does; a word cut by a hyphen at a
    line's end is joined; text far apart on one baseline (another column) is a box of its own."""
    content = (
        b"BT /F1 10 Tf 30 200 Td (Erster Absatz beginnt) Tj -10 -12 Td (und geht wei-) Tj 0 -12 Td (ter. Ende.) Tj"
        b" 10 -12 Td (Zweiter Absatz.) Tj -10 -12 Td (Hier weiter.) Tj 0 -12 Td (- Punkt eins) Tj 0 -12 Td"
        b" (- Punkt zwei) Tj ET BT /F1 10 Tf 200 200 Td (Rechte Spalte) Tj ET"
    )
    texts, _ = pdf.read_pdf(one_page(content))
    assert texts == [
        "Erster Absatz beginnt und geht weiter. Ende.",
        "Zweiter Absatz. Hier weiter.",
        "- Punkt eins",
        "- Punkt zwei",
        "Rechte Spalte",
    ]


def test_a_translation_is_drawn_in_the_standard_font_nearest_the_original():
    from pypdf.generic._font import Font

    names = ["ABCDEF+TimesNewRomanPSMT", "Georgia-Bold", "NotoSerif-Italic", "Garamond-BoldItalic", "Consolas"]
    names += ["DejaVuSans-Oblique", "Arial-BoldMT", "MS Sans Serif", "Helvetica"]
    assert [pdf.standard_font(Font(name=name, encoding={})) for name in names] == [
        "Times-Roman",
        "Times-Bold",
        "Times-Italic",
        "Times-BoldItalic",
        "Courier",
        "Helvetica-Oblique",
        "Helvetica-Bold",
        "Helvetica",
        "Helvetica",
    ]
    assert pdf.metrics("Times-Bold").character_widths["W"] == 1000  # (its own widths, to fit the box)


def test_inherited_resources_and_links_between_pages_leave_nothing_untranslated():
    """Resources and the page size inherited from the page tree are read; a link to the next page brings no copy of
    that page (or of its original text) into the result."""
    pages = raw_pdf(
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 /MediaBox [0 0 300 300] /Resources << /Font << /F1 7 0 R >> >>"
        b" >>",
        b"<< /Type /Page /Parent 2 0 R /Contents 5 0 R /Annots [8 0 R] >>",
        b"<< /Type /Page /Parent 2 0 R /Contents [6 0 R 9 0 R] >>",
        stream(b"BT /F1 12 Tf 10 100 Td (Seite eins) Tj ET"),
        stream(b"BT /F1 12 Tf 10 100 Td (Seite zwei) Tj"),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Annot /Subtype /Link /Rect [0 0 50 50] /Dest [4 0 R /Fit] >>",
        stream(b" ET 0 0 m 10 10 l S"),
    )
    texts, write = pdf.read_pdf(pages)
    assert texts == ["Seite eins", "Seite zwei"]
    out = pypdf.PdfReader(io.BytesIO(write(["Page one", "Page two"])))
    assert [page.extract_text() for page in out.pages] == ["Page one", "Page two"]
    assert [page.mediabox[2:] for page in out.pages] == [[300, 300]] * 2
    streams = [out.get_object(n).get_data() for n in out.xref[0] if hasattr(out.get_object(n), "get_data")]
    assert not any(b"Seite" in data for data in streams) and sum(b"0 0 m" in data for data in streams) == 1
    link = out.pages[0]["/Annots"][0].get_object()
    assert link["/Dest"][0].get_object() == out.pages[1]


def test_a_translation_outside_winansi_is_written_as_near_as_helvetica_can(sample):
    texts, write = pdf.read_pdf(sample)
    out = write(["Łódź „cafés” € ½ 東京 \x00\x1b"] + texts[1:])
    with reopened(out) as document:
        assert text_in(document, 0).startswith("?ódz „cafés” € ½ ?? Ein roter")


def test_pdf_is_listed_only_with_its_extra(client, monkeypatch):
    from vanilla_transformer.deploy.server import libretranslate

    assert ".pdf" in client.get("/frontend/settings").json()["supportedFilesFormat"]
    body = client.get("/spec").json()["paths"]["/translate_file"]["post"]["requestBody"]["content"]
    assert ".pdf)" in body["multipart/form-data"]["schema"]["properties"]["file"]["description"]
    monkeypatch.setattr(libretranslate, "PDF", ())
    assert ".pdf" not in client.get("/frontend/settings").json()["supportedFilesFormat"]
    assert "not supported" in answer_to(client, "a.pdf", reportlab_pdf()).json()["error"]


# ------------------------------------------------------------------------------------------------ hostile
def test_hostile_pdfs_are_400s_naming_the_problem(client, sample):
    cases = {
        b"": "an empty file",
        b"\x00\x01 garbage \xff" * 10: "not a .pdf file (a PDF starts with %PDF-",
        docx_bytes(): "a ZIP archive, not a .pdf file",
        documents.OLE_MAGIC + b"\0" * 600: "(.doc, .ppt or encrypted), not a .pdf file",
        b"junk" + sample: "a damaged document (4 bytes before the PDF header)",
        sample[: len(sample) // 2]: "a damaged document",
        sample[:-30]: "a damaged document",
        sample.replace(b"startxref", b"startxref\n99", 1): "a damaged document",
        re.sub(rb"\n0000000(\d{3}) 00000 n", lambda m: b"\n%010d 00000 n" % (int(m[1]) + 3), sample, count=1): (
            "a damaged document (object 1 is not where its cross-reference table says"
        ),
        sample.replace(b"/Root", b"/Rxxx"): "a damaged document",
        one_page(b"BT /F1 12 Tf 10 10 Td (Hallo) Tj ET").replace(b"/Length ", b"/Length 1", 1): "a damaged document",
    }
    for data, needle in cases.items():
        refused(client, "x.pdf", data, needle)


def test_encrypted_pdfs_are_refused_whatever_the_password(client, sample):
    for user in ("", "secret"):  # (an empty user password: opens without asking, encrypted all the same)
        writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(sample)))
        writer.encrypt(user, "owner", algorithm="RC4-128")
        out = io.BytesIO()
        writer.write(out)
        refused(client, "locked.pdf", out.getvalue(), "an encrypted (password-protected) document")


def test_bombs_and_oversized_pdfs_are_refused_naming_the_cap(client, monkeypatch):
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] >>"
    same_page = raw_pdf(b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count 9999 >>" % (
        b"3 0 R " * 5000), page)  # fmt: skip
    refused(client, "pages.pdf", same_page, "its page tree reaches object 3 twice (a page-count bomb?)")
    nested = [b"<< /Type /Catalog /Pages 2 0 R >>"] + [
        b"<< /Type /Pages /Kids [%d 0 R %d 0 R] /Count 1 >>" % (n + 1, n + 1) for n in range(2, 40)
    ]
    refused(client, "tree.pdf", raw_pdf(*nested, page), "twice (a page-count bomb?)")
    cycle = raw_pdf(b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [2 0 R] /Count 1 >>")
    refused(client, "cycle.pdf", cycle, "reaches object 2 twice")
    many = one_page(b"", *[b"<< /N %d >>" % n for n in range(documents.MAX_ENTRIES)])
    refused(
        client, "many.pdf", many, f"in {documents.MAX_ENTRIES + 5} objects (at most", f"{documents.MAX_ENTRIES} obj"
    )
    inflating = one_page(b"0 0 m " * (12 << 20))  # 72 MiB from 70 KiB
    refused(client, "bomb.pdf", inflating, "a decompression bomb?")
    ratio = one_page(b" " * (2 << 20))  # 2 MiB, 500 times its packed size
    refused(client, "ratio.pdf", ratio, "200 times packed; a decompression bomb?")
    monkeypatch.setattr(documents, "MAX_UNPACKED", 3 << 20)  # streams each within the ratio, too many in all
    monkeypatch.setattr(pdf, "MAX_UNPACKED", 3 << 20)
    noise = bytes(range(256)) * 4096  # (1 MiB, about its own size packed)
    spread = one_page(b"", *[stream(noise) for _ in range(4)])
    refused(client, "spread.pdf", spread, "bytes in 9 objects (at most 3145728 bytes")


def test_active_content_never_reaches_the_translated_pdf(client, sample):
    from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject, TextStringObject

    def d(**entries) -> DictionaryObject:
        return DictionaryObject({NameObject("/" + k): v for k, v in entries.items()})

    def name(value: str) -> NameObject:
        return NameObject("/" + value)

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(sample)))
    writer.add_attachment("evil.exe", b"MZ payload")
    script = d(S=name("JavaScript"), JS=TextStringObject("app.alert('names');"))
    writer.root_object["/Names"][name("JavaScript")] = d(Names=ArrayObject([TextStringObject("js"), script]))
    writer.root_object[name("OpenAction")] = d(S=name("JavaScript"), JS=TextStringObject("app.alert('open');"))
    page = writer.pages[0]
    page[name("AA")] = d(O=d(S=name("Launch"), F=TextStringObject("calc.exe")))
    rect = ArrayObject([pypdf.generic.FloatObject(v) for v in (0, 0, 50, 50)])
    links = {
        "Launch": d(S=name("Launch"), F=TextStringObject("calc.exe")),
        "JavaScript": d(S=name("JavaScript"), JS=TextStringObject("app.alert('link');")),
        "URI": d(S=name("URI"), URI=TextStringObject("javascript:app.alert('uri')")),
        "Web": d(S=name("URI"), URI=TextStringObject("https://example.org/kept")),
    }
    for action in links.values():
        writer.add_annotation(0, d(Type=name("Annot"), Subtype=name("Link"), Rect=rect, A=action))
    payload = DecodedStreamObject()
    payload.set_data(b"MZ attached payload")
    attached = d(Type=name("Filespec"), F=TextStringObject("evil2.exe"), EF=d(F=writer._add_object(payload)))
    writer.add_annotation(  # (the file in objects of their own: none may be left behind unreferenced)
        0, d(Type=name("Annot"), Subtype=name("FileAttachment"), Rect=rect, FS=writer._add_object(attached))
    )
    hostile = io.BytesIO()
    writer.write(hostile)
    out = translate_document(client, "active.pdf", hostile.getvalue())
    for needle in (b"app.alert", b"calc.exe", b"evil", b"MZ payload", b"MZ attached", b"javascript:"):
        assert needle not in out, needle
    reader = pypdf.PdfReader(io.BytesIO(out))
    keys, links = set(), []
    for number in reader.xref[0]:
        found = reader.get_object(number)
        keys |= set(found) if isinstance(found, dict) else set()
        links += [found["/A"]["/URI"]] if isinstance(found, dict) and "/A" in found else []
        assert not isinstance(found, dict) or found.get("/S") in (None, "/URI", "/GoTo"), found
    assert not keys & {"/JS", "/JavaScript", "/OpenAction", "/AA", "/EmbeddedFiles", "/EF", "/FS", "/Names"}
    with reopened(out) as document:
        assert links == ["https://example.org/kept"] and "gaT netuG" in text_in(document, 0)


# ------------------------------------------------------------------------------------------------ fuzzing
@FUZZ
@given(st.binary(max_size=3000), st.sampled_from([b"", b"%PDF-1.7\n", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n"]))
def test_any_bytes_are_a_refusal_never_another_error(data, start):
    try:
        texts, write = pdf.read_pdf(start + data)
        write(texts)
    except ValueError as error:
        assert str(error)


OPERAND = st.one_of(
    st.integers(-(10**12), 10**12).map(lambda n: b"%d" % n),
    st.floats(-1e12, 1e12).map(lambda x: b"%.4f" % x),
    st.sampled_from(
        [b"/F1", b"/F9", b"/Name", b"(Hallo Welt)", b"<48616c6c6f>", b"()", b"[(Ein) -300 (Hund) 12]", b"[]"]
    ),
)
OPERATOR = st.sampled_from(
    [b"BT", b"ET", b"q", b"Q", b"cm", b"Tf", b"Td", b"TD", b"Tm", b"T*", b"Tj", b"TJ", b"'", b'"', b"Tc", b"Tw", b"Tz"]
    + [b"TL", b"Ts", b"Tr", b"g", b"rg", b"k", b"cs", b"scn", b"re", b"f", b"Do", b"BDC", b"EMC", b"BI /W 1 /H 1 ID"]
)


@FUZZ
@given(st.lists(st.tuples(st.lists(OPERAND, max_size=7), OPERATOR), max_size=40))
def test_any_content_stream_is_read_and_written_back_or_refused(operations):
    """Operators in any order with operands of any type and size (unbalanced q/Q and BT/ET, huge numbers, text
    without a font): a translation or a refusal, the result a PDF another library opens."""
    content = b"\n".join(b" ".join(operands + [operator]) for operands, operator in operations)
    try:
        texts, write = pdf.read_pdf(one_page(b"BT /F1 12 Tf 10 10 Td (Hallo Welt) Tj ET\n" + content))
    except ValueError as error:
        assert str(error).startswith("a damaged document (page 1: "), error
        return
    out = write([text[::-1] for text in texts])
    with reopened(out) as document:
        assert len(document) == 1


@FUZZ
@given(st.data())
def test_any_damage_to_a_valid_pdf_is_a_400_or_a_translation_never_a_500_or_a_hang(client, sample, data):
    """Bytes changed, cut, inserted or removed anywhere (the test client raises the app's errors: a 500 fails)."""
    at = data.draw(st.integers(0, len(sample) - 1))
    change = data.draw(st.sampled_from(["flip", "cut", "insert", "remove"]))
    if change == "flip":
        damaged = sample[:at] + bytes([sample[at] ^ data.draw(st.integers(1, 255))]) + sample[at + 1 :]
    elif change == "cut":
        damaged = sample[:at]
    elif change == "insert":
        damaged = sample[:at] + data.draw(st.binary(min_size=1, max_size=20)) + sample[at:]
    else:
        damaged = sample[:at] + sample[at + data.draw(st.integers(1, 200)) :]
    start = time.monotonic()
    answer = answer_to(client, "fuzz.pdf", damaged)
    assert answer.status_code in (200, 400) and time.monotonic() - start < 30, answer.text
    if answer.status_code == 400:
        assert answer.json()["error"].startswith("Invalid request: fuzz.pdf: ")
