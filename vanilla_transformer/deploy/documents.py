"""The documents `/translate_file` takes besides .txt and .html, as LibreTranslate does: Word (.docx) and PowerPoint
(.pptx) files, OpenDocument text and presentations (.odt, .odp), e-books (.epub) and subtitles (.srt).

The four office formats and EPUB are ZIP archives of XML parts; each is read with the standard library's `zipfile`
and lxml (no network, no entities, no DTD), its paragraphs translated one by one (`/translate_file` cuts each into
sentences: `sentence_lines`), and the translation written back into the paragraph's own text runs (cut at spaces,
each run taking about its share of the original's length), so bold, italics, links, styles and everything else in
the archive stay as they were. A subtitle file keeps its numbers and timings, each subtitle translated as one text
over its own number of lines.

Refused with a ValueError naming the problem (`/translate_file` answers 400): an archive that is damaged, encrypted
(password-protected Office files are not ZIP archives), holds macros, or would unpack to more than `MAX_UNPACKED`
bytes, `MAX_ENTRIES` parts or `MAX_RATIO` times its packed size (a zip bomb); malformed XML; a subtitle file that is not
UTF-8 or not SubRip. Everything is done in memory: nothing is written to disk."""

import io
import re
import zipfile
from collections.abc import Callable

DOCUMENTS = (".docx", ".pptx", ".odt", ".odp", ".epub", ".srt")
MAX_UNPACKED = 64 << 20
MAX_ENTRIES = 5000
MAX_RATIO = 200
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an encrypted Office file, or a .doc / .ppt

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
XHTML = "{http://www.w3.org/1999/xhtml}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"

# Per format: the parts translated (a name pattern), the paragraph elements, and the elements holding the text of
# a run (None: the text is mixed content, every text node and tail inside the paragraph).
FORMATS = {
    ".docx": (r"word/(document|header\d*|footer\d*|footnotes|endnotes)\.xml", {W + "p"}, {W + "t"}),
    ".pptx": (r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml", {A + "p"}, {A + "t"}),
    ".odt": (r"content\.xml", {TEXT + "p", TEXT + "h"}, None),
    ".odp": (r"content\.xml", {TEXT + "p", TEXT + "h"}, None),
    ".epub": (r".+\.(xhtml|html|htm)", {XHTML + tag for tag in ("p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "td",
                                                                  "th", "dt", "dd", "caption", "figcaption", "title")},
              None),
}
SKIPPED = {XHTML + "script", XHTML + "style", TEXT + "note", TEXT + "tracked-changes"}
MACROS = re.compile(r"(^|/)vbaProject\.bin$|^(Basic|Scripts)/", re.IGNORECASE)


ABBREVIATIONS = {"Dr", "Mr", "Mrs", "Ms", "Prof", "St", "Nr", "Jr", "Sr", "vs", "bzw", "usw", "vgl", "ca", "med", "etc"}
SENTENCE_END = re.compile(r"(\w*)([.!?…]+[\"'»”)]*)\s+(?=[\"'«„“(]*[^\W\d_a-z])")


def sentence_lines(paragraph: str) -> str:
    """A paragraph with each sentence on a line of its own (a model translates sentences; a paragraph is often
    longer than a sentence it was trained on): a break after . ! ? or … (and closing quotes) before a capital, except
    after a single period ending a number, a word of one or two letters or a common abbreviation ("3.", "z.B.",
    "Dr.")."""
    def cut(match):
        word, end = match.group(1), match.group(2)
        if end.rstrip("\"'»”)") == "." and (word.isdigit() or len(word) <= 2 or word in ABBREVIATIONS):
            return match.group(0)
        return word + end + "\n"

    return SENTENCE_END.sub(cut, paragraph)


def distribute(text: str, sizes: list[int]) -> list[str]:
    """`text` cut at spaces into `len(sizes)` pieces, each about its share of `sizes` (the original runs' lengths):
    the pieces joined give `text` back."""
    if len(sizes) <= 1:
        return [text] * len(sizes)
    total, bounds, running = sum(sizes) or len(sizes), [], 0
    for size in sizes[:-1]:
        running += size or 1
        bounds.append(running / total * len(text))
    pieces, k, position = [""] * len(sizes), 0, 0
    for word in re.findall(r"\S+\s*|\s+", text):
        while k < len(bounds) and position >= bounds[k]:
            k += 1
        pieces[k] += word
        position += len(word)
    return pieces


class Paragraph:
    """The text slots of one paragraph: (element, "text" or "tail") where its text lives, in reading order."""

    def __init__(self, element, paragraphs: set, runs: set | None):
        self.slots: list[tuple] = []
        if runs is None:
            self.mixed(element, paragraphs)
        else:
            self.slots = [(e, "text") for e in element.iter(*runs) if nearest(e, paragraphs) is element]

    def mixed(self, element, paragraphs):
        """Mixed content: the element's text, then each child's (not into a paragraph of its own, a skipped element,
        a comment or a processing instruction) and every child's tail."""
        self.slots.append((element, "text"))
        for child in element:
            if isinstance(child.tag, str) and child.tag not in paragraphs and child.tag not in SKIPPED:
                self.mixed(child, paragraphs)
            self.slots.append((child, "tail"))

    def texts(self) -> list[str]:
        return [getattr(element, where) or "" for element, where in self.slots]

    @property
    def text(self) -> str:
        return "".join(self.texts())

    def write(self, translation: str) -> None:
        texts = self.texts()
        filled = [i for i, text in enumerate(texts) if text.strip()]
        first, last = texts[filled[0]], texts[filled[-1]]
        lead, trail = first[:len(first) - len(first.lstrip())], last[len(last.rstrip()):]  # kept around the text
        pieces = distribute(translation.strip(), [len(texts[i].strip()) for i in filled])
        for i in range(filled[0] + 1, filled[-1]):  # blanks between the runs: the pieces carry their spaces
            if not texts[i].strip() and texts[i]:
                setattr(*self.slots[i], "")
        for n, (i, piece) in enumerate(zip(filled, pieces)):
            element, where = self.slots[i]
            piece = (lead if n == 0 else "") + piece + (trail if n == len(filled) - 1 else "")
            setattr(element, where, piece)
            if where == "text" and element.tag == W + "t" and piece != piece.strip():
                element.set(XML_SPACE, "preserve")  # Word drops a run's outer spaces without it


def nearest(element, paragraphs: set):
    """The paragraph element that holds `element` most closely."""
    parent = element.getparent()
    while parent is not None and parent.tag not in paragraphs:
        parent = parent.getparent()
    return parent


def parse_xml(name: str, data: bytes):
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        return etree.fromstring(data, parser).getroottree()
    except etree.XMLSyntaxError as error:
        raise ValueError(f"a damaged document ({name}: {error})") from None


def serialize(tree) -> bytes:
    from lxml import etree

    info = tree.docinfo
    return etree.tostring(tree, xml_declaration=True, encoding=info.encoding or "UTF-8",
                          standalone=info.standalone)


def open_archive(data: bytes, kind: str) -> zipfile.ZipFile:
    """The ZIP archive of a document, checked: readable, unencrypted, without macros, not a bomb."""
    if data[:8] == OLE_MAGIC:
        raise ValueError(f"an encrypted (password-protected) document, or an old binary format; save it unencrypted "
                         f"as {kind}")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError):
        raise ValueError(f"a damaged document (not a readable {kind} file)") from None
    unpacked = sum(info.file_size for info in infos)
    if (len(infos) > MAX_ENTRIES or unpacked > MAX_UNPACKED
            or any(info.file_size > (1 << 20) and info.file_size > MAX_RATIO * max(1, info.compress_size)
                   for info in infos)):
        raise ValueError(f"refused: it would unpack to {unpacked} bytes in {len(infos)} parts (at most "
                         f"{MAX_UNPACKED} bytes, {MAX_ENTRIES} parts, {MAX_RATIO} times packed; a zip bomb?)")
    if any(info.flag_bits & 0x1 for info in infos):
        raise ValueError("an encrypted (password-protected) document; save it unencrypted")
    if any(MACROS.search(info.filename) for info in infos):
        raise ValueError("refused: the document holds macros; save it without them (as .docx, .pptx, .odt, .odp)")
    return archive


def read_part(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """One part, never more than it announced (a lying header reads as damage, not as a bomb)."""
    try:
        with archive.open(info) as part:
            data = part.read(info.file_size + 1)
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, NotImplementedError) as error:
        raise ValueError(f"a damaged document ({info.filename}: {error})") from None
    if len(data) > info.file_size:
        raise ValueError(f"a damaged document ({info.filename} is larger than its header says)")
    return data


def read_archive(data: bytes, kind: str) -> tuple[list[str], Callable[[list[str]], bytes]]:
    pattern, paragraphs, runs = FORMATS[kind]
    archive = open_archive(data, kind)
    infos = archive.infolist()
    names = {info.filename for info in infos}
    if kind.startswith(".od"):
        manifest = read_part(archive, archive.getinfo("META-INF/manifest.xml")) if \
            "META-INF/manifest.xml" in names else b""
        if b"encryption-data" in manifest:
            raise ValueError("an encrypted (password-protected) document; save it unencrypted")
    parts, found = {}, []
    for info in infos:
        if re.fullmatch(pattern, info.filename):
            tree = parse_xml(info.filename, read_part(archive, info))
            parts[info.filename] = tree
            found += [Paragraph(element, paragraphs, runs) for element in tree.iter(*paragraphs)]
    if not parts:
        raise ValueError(f"a damaged document (no {kind} content in the archive)")
    found = [paragraph for paragraph in found if paragraph.text.strip()]

    def write(translations: list[str]) -> bytes:
        for paragraph, translation in zip(found, translations, strict=True):
            paragraph.write(translation)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as packed:
            for info in infos:  # every part in its order, packed as it was (an OpenDocument's mimetype first, stored)
                content = serialize(parts[info.filename]) if info.filename in parts else read_part(archive, info)
                packed.writestr(info, content, compress_type=info.compress_type)
        return out.getvalue()

    return [paragraph.text.strip() for paragraph in found], write


TIMING = re.compile(r"\d+:\d{2}:\d{2}[,.]\d{1,3} *--> *\d+:\d{2}:\d{2}[,.]\d{1,3}.*")


def read_subtitles(data: bytes) -> tuple[list[str], Callable[[list[str]], bytes]]:
    """SubRip: blocks of a number, a timing line and text lines, a blank line between."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 text (byte {error.start})") from None
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.replace("\r\n", "\n").split("\n")
    blocks, start = [], None  # (first text line, end) per subtitle
    for number, line in enumerate(lines + [""], 1):
        if line.strip() and start is None:
            if not line.strip().isdigit():
                raise ValueError(f"line {number}: expected a subtitle number, got {line.strip()[:40]!r}")
            if number >= len(lines) or not TIMING.fullmatch(lines[number].strip()):
                raise ValueError(f"line {number + 1}: expected a timing (00:00:01,000 --> 00:00:02,000)")
            start = number + 1  # index of the first text line
        elif not line.strip() and start is not None:
            blocks.append((start, number - 1))
            start = None
    blocks = [(first, end) for first, end in blocks if first < end]

    def write(translations: list[str]) -> bytes:
        out = list(lines)
        for (first, end), translation in zip(blocks, translations, strict=True):
            pieces = distribute(translation, [len(line.strip()) for line in lines[first:end]])
            out[first:end] = [piece.strip() for piece in pieces]
        return newline.join(out).encode("utf-8")

    return [" ".join(line.strip() for line in lines[first:end]) for first, end in blocks], write


def read_document(kind: str, data: bytes) -> tuple[list[str], Callable[[list[str]], bytes]]:
    """A document's paragraphs to translate, and the function that writes the document back with their
    translations (in the same order). `kind`: its extension, one of DOCUMENTS."""
    return read_subtitles(data) if kind == ".srt" else read_archive(data, kind)
