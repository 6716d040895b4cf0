"""Damaged and hostile documents through `/translate_file`, generated: real .docx / .pptx / .odt / .odp / .epub files
made by their libraries, then damaged byte by byte (a part's data, its CRC-32, its sizes in the directory and in its
local header, a cut at every part boundary and at any byte, duplicate and escaping names, encryption flags, unknown
methods, nested archives, junk around the archive, lying extensions, hostile XML), subtitles and text files with
bad timings, byte-order marks and NUL bytes. Each is a 4xx in LibreTranslate's shape naming the part, never a 500;
valid documents (data descriptors, zip64 headers and nested archives included) still translate and open."""

import asyncio
import io
import re
import struct
import warnings
import zipfile
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")
pytest.importorskip("odf")
epub = pytest.importorskip("ebooklib.epub")
from test_libretranslate_production import docx_bytes, translate_document, zip_of  # noqa: E402

from conftest import FakeEngine, client_for, wait_ready  # noqa: E402
from vanilla_transformer.deploy.server import documents  # noqa: E402

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ------------------------------------------------------------------------------------------------ documents
def png() -> bytes:
    """A 2x2 PNG picture."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"\0" + b"\xff\0\0" * 2 + b"\0" + b"\0\xff\0" * 2
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">2I5B", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def docx_with_picture() -> bytes:
    document = docx.Document(io.BytesIO(docx_bytes()))
    document.add_paragraph("Ein Bild:")
    document.add_picture(io.BytesIO(png()))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx_with_picture() -> bytes:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "Guten Tag"
    slide.shapes.add_picture(io.BytesIO(png()), 0, 0)
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def odf(presentation: bool) -> bytes:
    from odf import draw, opendocument, style, text

    document = opendocument.OpenDocumentPresentation() if presentation else opendocument.OpenDocumentText()
    paragraph = text.P(text="Ein roter Ball")
    if presentation:
        layout = style.PageLayout(name="layout")
        document.automaticstyles.addElement(layout)
        master = style.MasterPage(name="Default", pagelayoutname=layout)
        document.masterstyles.addElement(master)
        page, frame, box = draw.Page(masterpagename=master), draw.Frame(width="20cm", height="5cm"), draw.TextBox()
        box.addElement(paragraph)
        frame.addElement(box)
        page.addElement(frame)
        document.presentation.addElement(page)
    else:
        document.text.addElement(paragraph)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def epub_book() -> bytes:
    book = epub.EpubBook()
    book.set_identifier("id1")
    book.set_title("Buch")
    chapter = epub.EpubHtml(title="Eins", file_name="one.xhtml", lang="de")
    chapter.content = "<html><body><h1>Kapitel eins</h1><p>Ein <em>kleines</em> Haus</p></body></html>"
    book.add_item(chapter)
    book.add_item(epub.EpubItem(uid="pic", file_name="pic.png", media_type="image/png", content=png()))
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = [chapter]
    out = io.BytesIO()
    epub.write_epub(out, book)
    return out.getvalue()


@pytest.fixture(scope="module")
def samples() -> dict[str, bytes]:
    return {
        "a.docx": docx_with_picture(),
        "b.pptx": pptx_with_picture(),
        "c.odt": odf(False),
        "d.odp": odf(True),
        "e.epub": epub_book(),
    }


@pytest.fixture(scope="module")
def client():
    with client_for(FakeEngine(), max_request_bytes=8 << 20) as test_client:
        wait_ready(test_client)
        yield test_client


def answer_to(client, name: str, data: bytes):
    """The answer to uploading `data` as `name`; a 500 raises in the test client (the app's exceptions are raised)."""
    return client.post(
        "/translate_file",
        data={"source": "de", "target": "en"},
        files={"file": (name, data, "application/octet-stream")},
    )


def refused(client, name: str, data: bytes, *needles: str) -> str:
    """Uploading `data` as `name` is a 400 in LibreTranslate's shape naming the file and each of `needles`."""
    answer = answer_to(client, name, data)
    assert answer.status_code == 400 and set(answer.json()) == {"error"}, (name, answer.status_code, answer.text)
    error = answer.json()["error"]
    assert error.startswith(f"Invalid request: {name}: "), error
    for needle in needles:
        assert needle in error, (needle, error)
    return error


# ------------------------------------------------------------------------------------------------ damaging
def layout(data: bytes) -> list[tuple[zipfile.ZipInfo, int, int]]:
    """(part, where its data starts, where its directory entry starts) for each part, in the directory's order."""
    infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    (end,) = [i for i in range(len(data) - 22, -1, -1) if data[i : i + 4] == b"PK\x05\x06"][:1]
    entry = struct.unpack_from("<L", data, end + 16)[0]
    out = []
    for info in infos:
        name_length, extra_length = struct.unpack_from("<2H", data, info.header_offset + 26)
        out.append((info, info.header_offset + 30 + name_length + extra_length, entry))
        entry += 46 + sum(struct.unpack_from("<3H", data, entry + 28))
    return out


def patched(data: bytes, at: int, form: str, change) -> bytes:
    """`data` with the field of struct format `form` at `at` replaced by `change(old value)`."""
    (old,) = struct.unpack_from(form, data, at)
    out = bytearray(data)
    struct.pack_into(form, out, at, change(old))
    return bytes(out)


def plus(delta: int):
    return lambda value: (value + delta) % (1 << 32)


def flipped(data: bytes, at: int) -> bytes:
    return patched(data, at, "B", lambda byte: byte ^ 0x5A)


def rebuilt(data: bytes, stream=None, **options) -> bytes:
    """The archive's parts written again by zipfile (into `stream` when given: an unseekable one gets data
    descriptors), `options` passed to `ZipFile.open` for each part (force_zip64)."""
    out = stream or io.BytesIO()
    source = zipfile.ZipFile(io.BytesIO(data))
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as packed:
        for info in source.infolist():
            with packed.open(zipfile.ZipInfo(info.filename, info.date_time), "w", **options) as part:
                part.write(source.read(info))
    return bytes(out.written) if stream else out.getvalue()


class Unseekable(io.RawIOBase):
    """A write-only stream without seek: zipfile writes data descriptors into it."""

    def __init__(self):
        self.written = bytearray()

    def writable(self):
        return True

    def write(self, data):
        self.written += data
        return len(data)


def parts_of(data: bytes) -> dict[str, bytes]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    return {info.filename: archive.read(info) for info in archive.infolist()}


# ------------------------------------------------------------------------------------------------ the tests
def test_a_byte_changed_in_any_parts_data_is_a_400_naming_the_part(client, samples):
    """The catalogue's example, for every part of every kind: a picture (or any part) whose data no longer matches
    its CRC-32, read when the result is written, was a 500; now it is refused before any work, the part named."""
    for name, data in samples.items():
        for info, start, _ in layout(data):
            if info.compress_size:
                refused(
                    client, name, flipped(data, start + info.compress_size // 2), f": {info.filename}: ", "damaged part"
                )


def test_a_part_lying_about_its_checksum_or_sizes_is_a_400_naming_it(client, samples):
    """The directory's CRC-32, compressed size or size changed (alone: it disagrees with the local header; in both
    headers: the data disagrees), one field, way and place per part in turn, every part of every kind; and every
    field, way and place for the pictures."""
    fields = [(16, 14, 1), (20, 18, -1), (24, 22, 1), (16, 14, -1), (20, 18, 1), (24, 22, -1)]  # where, how
    for name, data in samples.items():
        for k, (info, _, entry) in enumerate(layout(data)):
            picture = info.filename.endswith(".png")
            for in_directory, in_header, change in fields if picture else [fields[k % 6]]:
                lie = patched(data, entry + in_directory, "<L", plus(change))
                if picture or k % 2:
                    refused(client, name, lie, f": {info.filename}: ")
                both = patched(lie, info.header_offset + in_header, "<L", plus(change))
                if picture or not k % 2:
                    refused(client, name, both, f": {info.filename}: ")


def test_an_archive_cut_at_every_part_boundary_is_a_400(client, samples):
    for name, data in samples.items():
        cuts = {len(data) - 1, len(data) - 22, 0, 4, 29}
        for info, start, entry in layout(data):
            cuts |= {info.header_offset, start + info.compress_size, entry}  # before its header, after its data
        for cut in sorted(cuts):
            error = refused(client, name, data[:cut])
            assert "damaged" in error or "an empty file" in error, error


@FAST
@given(st.data())
def test_an_archive_cut_at_any_byte_is_a_400_and_any_byte_changed_is_never_a_500(client, samples, data):
    name = data.draw(st.sampled_from(sorted(samples)))
    document = samples[name]
    cut = data.draw(st.integers(0, len(document) - 1))
    refused(client, name, document[:cut])
    at, xor = data.draw(st.integers(0, len(document) - 1)), data.draw(st.integers(1, 255))
    changed = patched(document, at, "B", lambda byte: byte ^ xor)
    answer = answer_to(client, name, changed)
    assert answer.status_code in (200, 400), answer.text  # a changed date or attribute may still be a valid archive
    if answer.status_code == 400:
        assert answer.json()["error"].startswith(f"Invalid request: {name}: ")


def test_junk_around_the_archive_and_lying_extensions_are_400s(client, samples):
    good = samples["a.docx"]
    refused(client, "a.docx", b"MZ\x90\0" * 100 + good, "400 bytes before the ZIP archive")
    refused(client, "a.docx", good + b"\0junk", "5 bytes after the end of the ZIP archive")
    refused(client, "a.docx", b"", "an empty file")
    refused(client, "a.docx", b"%PDF-1.7\n%\xe2\xe3\n1 0 obj", "a PDF document, not a .docx file")
    refused(client, "b.pptx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 512, "encrypted (password-protected)")
    refused(client, "b.pptx", good, "no .pptx content")
    refused(client, "e.epub", good, "no .epub content")
    refused(client, "c.odt", samples["d.odp"], "mimetype: ", "not .odt")
    refused(client, "d.odp", samples["c.odt"], "mimetype: ", "not .odp")
    end = good.rindex(b"PK\x05\x06")
    refused(
        client,
        "a.docx",
        patched(patched(good, end + 8, "<H", plus(-1)), end + 10, "<H", plus(-1)),
        f"the ZIP end record counts {len(layout(good)) - 1} parts, its directory holds {len(layout(good))}",
    )
    (first, _, _), (second, _, entry) = layout(good)[:2]  # two entries, one local header: overlapping parts
    refused(
        client,
        "a.docx",
        patched(good, entry + 42, "<L", lambda _: first.header_offset),
        f"{second.filename}: a damaged part",
        "overlapping parts",
    )
    refused(client, "a.txt", good, "not UTF-8 text")
    refused(client, "a.srt", samples["e.epub"], "not UTF-8 text")


def test_duplicate_escaping_encrypted_and_unknown_parts_are_400s_naming_them(client, samples):
    parts = parts_of(samples["a.docx"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name it writes
        twice = io.BytesIO()
        with zipfile.ZipFile(twice, "w") as packed:
            for part, content in [*parts.items(), ("word/media/image1.png", png())]:
                packed.writestr(part, content)
    refused(client, "a.docx", twice.getvalue(), "word/media/image1.png: two parts of this name")
    refused(client, "a.docx", zip_of({**parts, "word/media/IMAGE1.png": png()}), "IMAGE1.png: two parts")
    book = parts_of(samples["e.epub"])  # EPUB names keep their case: two pictures differing by case are two parts
    assert answer_to(client, "e.epub", zip_of({**book, "EPUB/PIC.png": png()})).status_code == 200
    for bad in ("../evil.png", "/etc/evil.png", "word\\evil.png", "C:/evil.png", "word/a\x01.png"):
        refused(client, "a.docx", zip_of({**parts, bad: png()}), "not a relative path inside the archive")
    bzip2 = io.BytesIO()
    with zipfile.ZipFile(bzip2, "w") as packed:
        for part, content in parts.items():
            packed.writestr(part, content, zipfile.ZIP_BZIP2 if part.endswith(".png") else zipfile.ZIP_DEFLATED)
    refused(client, "a.docx", bzip2.getvalue(), "word/media/image1.png: compressed with method 12")
    data = samples["a.docx"]
    ((info, _, entry),) = [row for row in layout(data) if row[0].filename == "word/media/image1.png"]
    locked = patched(
        patched(data, entry + 8, "<H", lambda flags: flags | 1), info.header_offset + 6, "<H", lambda flags: flags | 1
    )
    refused(client, "a.docx", locked, "word/media/image1.png: encrypted (password-protected)")


def test_nested_archives_are_verified_and_counted_against_the_caps(client, samples, monkeypatch):
    parts = parts_of(samples["a.docx"])
    sheet = zip_of({"xl/workbook.xml": b"<workbook/>" * 50, "xl/media/p.png": png()})
    kept = translate_document(client, "a.docx", zip_of({**parts, "word/embeddings/Sheet.xlsx": sheet}))
    assert parts_of(kept)["word/embeddings/Sheet.xlsx"] == sheet  # an embedded workbook comes back as it was
    ((info, start, _),) = [row for row in layout(sheet) if row[0].filename == "xl/media/p.png"]
    refused(
        client,
        "a.docx",
        zip_of({**parts, "word/embeddings/Sheet.xlsx": flipped(sheet, start + 5)}),
        "word/embeddings/Sheet.xlsx: xl/media/p.png: a damaged part",
    )
    refused(
        client,
        "a.docx",
        zip_of({**parts, "word/embeddings/Sheet.xlsx": sheet[:-30]}),
        "word/embeddings/Sheet.xlsx: a damaged document",
    )
    deep = zip_of({"c.zip": zip_of({"d.zip": zip_of({"e.txt": b"x"})})})
    refused(
        client,
        "a.docx",
        zip_of({**parts, "word/embeddings/deep.zip": deep}),
        "word/embeddings/deep.zip: c.zip: d.zip: archives nested more than 2 deep",
    )
    refused(
        client,
        "a.docx",
        zip_of({**parts, "word/embeddings/bomb.zip": zip_of({"zeros": b"\0" * (4 << 20)})}),
        "word/embeddings/bomb.zip: refused",
        "a zip bomb?",
    )
    noise = zip_of({"noise.bin": bytes(range(256)) * 40}, zipfile.ZIP_STORED)  # 10 kB that do not compress
    with_noise = zip_of({**parts, "word/embeddings/noise.zip": noise})
    monkeypatch.setattr(documents, "MAX_UNPACKED", sum(map(len, parts.values())) + len(noise) + 5000)
    refused(client, "a.docx", with_noise, "word/embeddings/noise.zip: refused", "a zip bomb?")  # the outer fits
    monkeypatch.setattr(documents, "MAX_ENTRIES", len(parts) + 1)
    refused(client, "a.docx", with_noise, f"in {len(parts) + 2} parts")


def test_data_descriptors_and_zip64_headers_are_read_and_checked(client, samples):
    for name, data in samples.items():
        described = rebuilt(data, Unseekable())
        assert all(info.flag_bits & 0x8 for info in zipfile.ZipFile(io.BytesIO(described)).infolist())
        zip64 = rebuilt(data, force_zip64=True)
        for valid in (described, zip64):
            out = translate_document(client, name, valid)
            assert zipfile.ZipFile(io.BytesIO(out)).testzip() is None
    data = rebuilt(samples["a.docx"], Unseekable())
    docx.Document(io.BytesIO(translate_document(client, "a.docx", data)))
    for info, start, _ in layout(data):  # the descriptor after the data: its CRC-32, sizes
        for field in (4, 8, 12):
            refused(
                client, "a.docx", flipped(data, start + info.compress_size + field), f"{info.filename}: a damaged part"
            )


def test_hostile_xml_in_a_translated_part_is_a_400_naming_it(client, samples):
    parts = parts_of(samples["a.docx"])
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "ha">'
        + b"".join(b'<!ENTITY a%d "%s">' % (i, (b"&a%d;" % (i - 1) if i > 1 else b"&a;") * 10) for i in range(1, 10))
        + b"]><l>&a9;</l>"
    )
    cases = {
        laughs: "word/document.xml",
        b'<!DOCTYPE d [<!ENTITY e SYSTEM "file:///etc/passwd">]><d>&e;</d>': "a DTD of its own",
        b'<!DOCTYPE d [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x.dtd"> %p;]><d/>': "a DTD of its own",
        b"<d>" * 400 + b"</d>" * 400: "not well-formed XML",
        b'<?xml version="1.0" encoding="UTF-16"?><d>a</d>': "not well-formed XML",
        b'<?xml version="1.0" encoding="x-unknown"?><d>a</d>': "Unsupported encoding",
        b'<?xml version="1.0" encoding="UTF-8"?><d>\xe4</d>': "not well-formed XML",
        b'<d a="' + b"x" * (11 << 20) + b'"/>': "a zip bomb?",
    }  # over libxml2's limit, refused before it
    for xml, message in cases.items():
        refused(client, "a.docx", zip_of({**parts, "word/document.xml": xml}), message)
    latin = parts["word/document.xml"].decode().replace("encoding='UTF-8'", "encoding='ISO-8859-1'")
    latin = latin.replace("Zelle eins", "Zelle \xe4").encode("latin-1")
    out = translate_document(client, "a.docx", zip_of({**parts, "word/document.xml": latin}))
    assert docx.Document(io.BytesIO(out)).tables[0].cell(0, 0).text == "\xe4 elleZ"


def test_valid_documents_translate_open_and_keep_untranslated_parts_byte_for_byte(client, samples):
    for name, data in samples.items():
        out = translate_document(client, name, data)
        before, after = parts_of(data), parts_of(out)
        assert list(after) == list(before)
        pictures = [part for part in before if part.endswith(".png")]
        assert all(after[part] == before[part] == png() for part in pictures)
        assert pictures or name.endswith((".odt", ".odp"))
        first = "[Content_Types].xml" if name.endswith((".docx", ".pptx")) else "mimetype"
        assert after[first] == before[first]
    result = docx.Document(io.BytesIO(translate_document(client, "a.docx", samples["a.docx"])))
    assert result.paragraphs[0].text == "dnuH rezrawhcs niE" and len(result.inline_shapes) == 1
    assert (
        pptx.Presentation(io.BytesIO(translate_document(client, "b.pptx", samples["b.pptx"])))
        .slides[0]
        .shapes.title.text
        == "gaT netuG"
    )


def test_a_translation_with_characters_xml_cannot_hold_is_written_without_them(samples):
    texts, write = documents.read_document(".docx", samples["a.docx"])
    out = write(["a\x00b\x1bc\ufffe\ud800d"] * len(texts))
    assert docx.Document(io.BytesIO(out)).paragraphs[0].text == "abcd"


# ------------------------------------------------------------------------------------------------ subtitles, text
SUBTITLES = "1\n00:00:01,000 --> 00:00:02,500\nZwei Hunde\nim Schnee\n\n2\n00:00:03,000 --> 00:00:04,000\nJa\n"


def test_subtitles_with_bad_numbers_or_timings_are_400s_naming_the_line(client):
    cases = {
        "1\n00:00:05,000 --> 00:00:01,000\nJa\n": "line 2: the subtitle ends before it starts",
        "1\n00:61:00,000 --> 00:62:00,000\nJa\n": "line 2: a timing with minutes or seconds over 59",
        "1\n00:00:01,000 --> 00:00:02,000 \u0661\nJa\n\n2\n"
        "\u0660\u0660:00:01,000 --> 00:00:02,000\nJa\n": "line 6: expected a timing",
        "1\n00:00:01,000 --> 00:00:02,0001\nJa\n": "line 2: expected a timing",
        "99999999999999999999\n00:00:01,000 --> 00:00:02,000\nJa\n": "line 1: expected a subtitle number",
        "\u0661\n00:00:01,000 --> 00:00:02,000\nJa\n": "line 1: expected a subtitle number",
        "1\n": "line 2: expected a timing",
        "1\n00:00:01,000 --> 00:00:02,000\nJa\0\n": "a NUL byte",
    }
    for subtitles, message in cases.items():
        refused(client, "s.srt", subtitles.encode(), message)
    refused(client, "s.srt", SUBTITLES.encode("utf-16"), "UTF-16")


def test_subtitles_keep_their_line_ends(client):
    for newline in ("\r\n", "\r", "\n"):
        data = ("\ufeff" + SUBTITLES.replace("\n", newline)).encode()  # a byte-order mark is read as no text
        out = translate_document(client, "s.srt", data).decode()
        assert out.startswith("1" + newline) and "aJ" + newline in out
        assert out.count(newline) == data.decode().count(newline)
    assert translate_document(client, "e.srt", b"") == b""


@FAST
@given(st.lists(st.text(max_size=30), min_size=2, max_size=2))
def test_any_translation_of_subtitles_reads_back_as_the_same_subtitles(translations):
    """A blank line ends a subtitle: a translation shorter than its lines, or holding line breaks, never adds one."""
    texts, write = documents.read_document(".srt", SUBTITLES.encode())
    out = write(translations)
    again, _ = documents.read_document(".srt", out)  # read back: every number and timing where a subtitle starts
    assert [block.split("\n")[:2] for block in out.decode().strip("\n").split("\n\n")] == [
        ["1", "00:00:01,000 --> 00:00:02,500"],
        ["2", "00:00:03,000 --> 00:00:04,000"],
    ]
    assert len(again) <= len(texts) == 2


def test_text_files_with_marks_nuls_utf16_or_surrogates(client):
    assert (
        translate_document(client, "a.txt", b"\xef\xbb\xbfHallo\r\nWelt\nJa\r") == b"ollaH\r\ntleW\naJ\r"
    )  # the mark read as no text, each line's end kept
    assert translate_document(client, "a.html", b"\xef\xbb\xbf<p>Hallo</p>") == b"<p>ollaH</p>"
    assert translate_document(client, "e.txt", b"") == b""
    refused(client, "a.txt", b"Hallo\0Welt", "a NUL byte at byte 5")
    refused(client, "a.html", "<p>Hallo</p>".encode("utf-16"), "UTF-16")
    refused(client, "a.txt", "Hallo".encode("utf-16-be"), "a NUL byte at byte 0")
    refused(client, "a.txt", b"Hallo \xed\xa0\x80 Welt", "not UTF-8 text (byte 6)")  # a surrogate, as bytes


def test_a_bit_changed_in_any_header_byte_is_refused_or_only_metadata(samples):
    """Every field's byte of every local header, directory entry and the end record, one bit changed: the document
    is refused, or the change was in what is metadata only (versions, times, attributes)."""
    data = samples["a.docx"]
    metadata = {
        "local": set(range(4, 6)) | set(range(10, 14)),  # version needed, time and date
        "entry": set(range(4, 8)) | set(range(12, 16)) | set(range(36, 42)),
    }  # versions, time, attributes
    places = []
    for info, _, entry in layout(data):
        places += [("local", info.header_offset + k, k) for k in range(30)]  # the fields (a name's bytes changed:
        places += [("entry", entry + k, k) for k in range(46)]  # the two headers disagree, tested above)
    end = data.rindex(b"PK\x05\x06")
    places += [("end", end + k, k) for k in range(22)]
    accepted = set()
    for where, at, k in places:
        try:
            documents.read_document(".docx", patched(data, at, "B", lambda byte: byte ^ 1))
            accepted.add((where, k))
        except ValueError:
            pass
    assert accepted and all(k in metadata.get(where, ()) for where, k in accepted), sorted(accepted)


# ------------------------------------------------------------------------------------------------ hostile sizes, markup
# The sentence splitting intended, as first written (quadratic on a long word: a reference for small inputs only).
QUADRATIC_SENTENCE_END = re.compile(r"(\w*)([.!?…]+[\"'»”)]*)\s+(?=[\"'«„“(]*[^\W\d_a-z])")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aZ1_.!?…\"'»”)(«„“ \n-", max_size=16))
def test_sentence_splitting_matches_the_intended_splitting(text):
    def marked(match):
        return f"[{match.group(1)}|{match.group(2)}]"

    assert documents.SENTENCE_END.sub(marked, text) == QUADRATIC_SENTENCE_END.sub(marked, text)


def test_sentence_splitting_is_linear_on_long_runs():
    """200,000 characters of each worst case (a run of letters, digits, dots, spaces, quotes, mixed): each split
    at once (the quadratic expression took hours on one of them)."""
    n = 200_000
    for text in (
        "a" * n,
        "1" * n,
        "." * n,
        " " * n,
        "a." + '"' * n,
        "a. " + "“" * n + "b",
        "a." + " " * n + "b",
        "ab1_." * (n // 5),
        "a" * (n // 2) + "." * (n // 2),
        "Ja. " * (n // 4),
    ):
        assert documents.sentence_lines(text).replace("\n", " ") == text


def test_documents_are_read_and_written_off_the_event_loop(client, samples, monkeypatch):
    """However small the upload (a document unpacks to far more), reading it, cutting its sentences and writing it
    back run in a worker thread: no event loop runs in the thread doing them."""
    from vanilla_transformer.deploy.server import libretranslate

    def on_loop() -> bool:
        try:
            return asyncio.get_running_loop() is not None
        except RuntimeError:
            return False

    seen = []

    def reader(kind, data):
        seen.append(("read", on_loop()))
        texts, write = documents.read_document(kind, data)
        return texts, lambda translations: seen.append(("write", on_loop())) or write(translations)

    monkeypatch.setattr(libretranslate, "read_document", reader)
    assert len(samples["c.odt"]) < 16 << 10
    translate_document(client, "c.odt", samples["c.odt"])
    translate_document(client, "s.srt", SUBTITLES.encode())
    assert seen == [("read", False), ("write", False)] * 2


def test_subtitle_markup_is_kept_not_translated(client):
    subtitles = (
        '1\n00:00:01,000 --> 00:00:02,000\n<i>Hallo</i>\n{\\an8}<font color="red">Ja <b>gut</b></font>\n\n'
        "2\n00:00:03,000 --> 00:00:04,000\n<i></i>\n"
    )
    texts, _ = documents.read_document(".srt", subtitles.encode())
    assert texts == ["Hallo Ja gut"]  # what the model reads: no tags; a subtitle of tags only is not translated
    out = translate_document(client, "s.srt", subtitles.encode()).decode()
    assert out == (
        '1\n00:00:01,000 --> 00:00:02,000\n<i>tug aJ</i>\n{\\an8}<font color="red"><b>ollaH</b></font>\n\n'
        "2\n00:00:03,000 --> 00:00:04,000\n<i></i>\n"
    )


def test_subtitles_without_a_blank_line_between_stay_apart_and_timings_are_never_text(client):
    joined = "1\n00:00:01,000 --> 00:00:02,000\nHallo\n2\n00:00:03,000 --> 00:00:04,000\nWelt\n"
    assert documents.read_document(".srt", joined.encode())[0] == ["Hallo", "Welt"]
    assert translate_document(client, "s.srt", joined.encode()).decode() == joined.replace("Hallo", "ollaH").replace(
        "Welt", "tleW"
    )
    refused(
        client,
        "s.srt",
        b"1\n00:00:01,000 --> 00:00:02,000\nJa\n00:00:03,000 --> 00:00:04,000\nNein\n",
        "line 4: a timing among a subtitle's text",
    )
