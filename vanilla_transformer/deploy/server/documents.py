"""The documents `/translate_file` takes besides .txt and .html, as LibreTranslate does: Word (.docx) and PowerPoint
(.pptx) files, OpenDocument text and presentations (.odt, .odp), e-books (.epub) and subtitles (.srt).

The four office formats and EPUB are ZIP archives of XML parts; each is read with the standard library's `zipfile`
and lxml (no network, no entities, no DTD), its paragraphs translated one by one (`/translate_file` cuts each into
sentences: `sentence_lines`), and the translation written back into the paragraph's own text runs (cut at spaces,
each run taking about its share of the original's length), so bold, italics, links, styles and everything else in
the archive stay as they were. A subtitle file keeps its numbers and timings, each subtitle translated as one text
over its own number of lines.

Every part of an archive is read once and verified before any work (`verify_archive`), and the result is written
from those bytes: nothing is read again from the upload. Refused with a ValueError naming the part and the problem
(`/translate_file` answers 400): an empty file or another format under the extension (a PDF, an OLE file: .doc, .ppt or
a password-protected Office file); an archive that is damaged (a checksum, a size, a header, a cut, bytes before or
after it), encrypted, holds macros, names a part twice or outside itself, or would unpack to more than `MAX_UNPACKED`
bytes, `MAX_ENTRIES` parts or `MAX_RATIO` times its packed size, archives inside it counted (a zip bomb); malformed XML
or a part declaring its own DTD (entities); a subtitle or text file that is not UTF-8 or holds a NUL byte; subtitles
that are not SubRip or whose timing is impossible. Everything is done in memory: nothing is written to disk."""

import codecs
import io
import re
import struct
import zipfile
import zlib
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

# Per archive format (the documents but .srt): the parts translated (a name pattern), the paragraph elements, and
# the elements holding the text of a run (None: the text is mixed content, every text node and tail inside the
# paragraph).
ARCHIVE_FORMATS = {
    ".docx": (r"word/(document|header\d*|footer\d*|footnotes|endnotes)\.xml", {W + "p"}, {W + "t"}),
    ".pptx": (r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml", {A + "p"}, {A + "t"}),
    ".odt": (r"content\.xml", {TEXT + "p", TEXT + "h"}, None),
    ".odp": (r"content\.xml", {TEXT + "p", TEXT + "h"}, None),
    ".epub": (
        r".+\.(xhtml|html|htm)",
        {
            XHTML + tag
            for tag in (
                "p",
                "h1",
                "h2",
                "h3",
                "h4",
                "h5",
                "h6",
                "li",
                "td",
                "th",
                "dt",
                "dd",
                "caption",
                "figcaption",
                "title",
            )
        },
        None,
    ),
}
SKIPPED = {XHTML + "script", XHTML + "style", TEXT + "note", TEXT + "tracked-changes"}
MACROS = re.compile(r"(^|/)vbaProject\.bin$|^(Basic|Scripts)/", re.IGNORECASE)
MIMETYPES = {
    ".odt": "application/vnd.oasis.opendocument.text",  # the `mimetype` part (a template's ends "-template")
    ".odp": "application/vnd.oasis.opendocument.presentation",
    ".epub": "application/epub+zip",
}
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


ABBREVIATIONS = {"Dr", "Mr", "Mrs", "Ms", "Prof", "St", "Nr", "Jr", "Sr", "vs", "bzw", "usw", "vgl", "ca", "med", "etc"}
# The lookbehinds make a match start only where a word (or, after no word, a run of . ! ? …) starts: tried from
# inside a run, `\w*` or `[.!?…]+` would scan the rest of it at every position (quadratic on a long word).
SENTENCE_END = re.compile(r"(?<!\w)(\w*)(?<![.!?…])([.!?…]+[\"'»”)]*)\s+(?=[\"'«„“(]*[^\W\d_a-z])")


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
        lead, trail = first[: len(first) - len(first.lstrip())], last[len(last.rstrip()) :]  # kept around the text
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
    """A part's XML tree: no network, no DTD loaded, no entity declared in the part itself (a billion laughs, an
    external file), libxml2's limits on depth and sizes kept."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        tree = etree.fromstring(data, parser).getroottree()
    except (etree.LxmlError, ValueError, LookupError) as error:
        raise ValueError(f"{name}: not well-formed XML ({' '.join(str(error).split())})") from None
    dtd = tree.docinfo.internalDTD  # a <!DOCTYPE html> is fine; declarations in the part itself are not
    if dtd is not None and (any(True for _ in dtd.iterentities()) or any(True for _ in dtd.iterelements())):
        raise ValueError(
            f"{name}: refused: it declares entities or elements in a DTD of its own; documents' parts do not"
        )
    return tree


def serialize(tree) -> bytes:
    from lxml import etree

    return etree.tostring(tree, xml_declaration=True, encoding="UTF-8", standalone=tree.docinfo.standalone)


def xml_text(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold (a translation is written into a part as it comes)."""
    return NOT_XML.sub("", text)


# ------------------------------------------------------------------------------------------ verifying an archive
# Every part of an uploaded archive is read once, checked, and kept in memory before any work: the result is written
# from these bytes, never read again from the upload. The ZIP format's records are checked against each other, as a
# careful unzip would: the end record ends the upload (no bytes after it) and counts the directory's entries; the
# directory, the local headers and any data descriptors agree on names, flags, methods, checksums and sizes; the parts
# follow each other from byte 0 to the directory with no gap and no overlap; each part inflates to exactly its
# declared size with its declared CRC-32, its compressed data ending exactly where its header says. An archive inside
# an archive (an embedded workbook) is checked the same way, its parts counted against the same caps.
LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # signature, version, flags, method, time, date, CRC-32, sizes, name, extra
END_RECORD = struct.Struct("<4s4H2LH")  # signature, disks, entries here / in all, directory size / offset, comment
ZIP64_LOCATOR = struct.Struct("<4sLQL")  # signature, disk, offset of the zip64 end record, disks
ZIP64_END = struct.Struct("<4sQ2H2L4Q")  # signature, size, versions, disks, entries here / all, directory size, offset
KNOWN_FLAGS = 0x0002 | 0x0004 | 0x0008 | 0x0800  # deflate options, a data descriptor, UTF-8 names
MAX_NESTING = 2  # archives inside the document's archive, inside each other
SIGNATURES = {
    b"%PDF": "a PDF document",
    OLE_MAGIC: None,
    b"{\\rtf": "an RTF document",
    b"\x1f\x8b": "a gzip file",
    b"Rar!": "a RAR archive",
    b"7z\xbc\xaf": "a 7-Zip archive",
}


class Refusal(ValueError):
    """An upload refused by a rule of this module's or `pdf`'s (its damage found, a cap, encryption), naming the
    problem: told apart from the errors a library raises on the upload."""


class Budget:
    """What one upload may still unpack, its nested archives included: bytes and parts (a PDF's: its streams' bytes
    and its objects, `units` naming them and `bomb` what breaking the caps looks like)."""

    def __init__(self, units: str = "parts", bomb: str = "a zip bomb"):
        self.size, self.parts, self.units, self.bomb = MAX_UNPACKED, MAX_ENTRIES, units, bomb

    def refuse(self, unpacked: int, parts: int) -> ValueError:
        return Refusal(
            f"refused: it would unpack to {unpacked} bytes in {parts} {self.units} (at most {MAX_UNPACKED} "
            f"bytes, {MAX_ENTRIES} {self.units}, {MAX_RATIO} times packed; {self.bomb}?)"
        )

    def spend(self, packed: int, sizes: list[tuple[int, int]], parts: int | None = None) -> None:
        """Count `sizes` (each part's unpacked and packed bytes, of an upload of `packed` bytes) and `parts` parts
        (one a size where None) against what is left, or refuse them (`refuse`): past the caps on bytes or parts, or
        where a part or all of them, unpacking to over 1 MiB, would be more than MAX_RATIO times their packed size."""
        parts = len(sizes) if parts is None else parts
        unpacked = sum(size for size, _ in sizes)
        ratios = [(unpacked, packed), *sizes]
        if (
            parts > self.parts
            or unpacked > self.size
            or any(size > (1 << 20) and size > MAX_RATIO * max(1, small) for size, small in ratios)
        ):
            raise self.refuse(MAX_UNPACKED - self.size + unpacked, MAX_ENTRIES - self.parts + parts)
        self.size, self.parts = self.size - unpacked, self.parts - parts


def damaged(what: str) -> ValueError:
    """The error for an archive damaged as a whole (a part's own damage names the part)."""
    return Refusal(f"a damaged document ({what})")


def not_a_zip(data: bytes, kind: str) -> str | None:
    """Why `data` cannot be a ZIP archive at all (an empty file, another format under the extension), or None."""
    if not data:
        return "an empty file"
    for magic, what in SIGNATURES.items():
        if data.startswith(magic):
            if what is None:
                return (
                    f"an encrypted (password-protected) document, or an old binary format (.doc, .ppt); save it "
                    f"unencrypted as {kind}"
                )
            return f"{what}, not a {kind} file"
    junk = data.find(b"PK\x03\x04")
    if junk > 0 and b"PK\x05\x06" in data[-0x10015:]:
        return f"a damaged document ({junk} bytes before the ZIP archive)"
    if not data.startswith(b"PK\x03\x04"):
        return f"not a {kind} file (a {kind} file is a ZIP archive, starting with PK; this one starts {data[:8]!r})"
    return None


def end_record(data: bytes) -> tuple[int, int, int]:
    """(entries, directory start, directory end) from the archive's end record (zip64's where there is one), which
    must end the data, the directory ending where the record starts."""
    at = data.rfind(b"PK\x05\x06", max(0, len(data) - END_RECORD.size - 0xFFFF))
    if at < 0 or at + END_RECORD.size > len(data):
        raise damaged("cut short: no ZIP directory at its end")
    _, disk, cd_disk, here, entries, cd_size, cd_offset, comment = END_RECORD.unpack_from(data, at)
    if at + END_RECORD.size + comment != len(data):
        raise damaged(
            f"{len(data) - at - END_RECORD.size - comment} bytes after the end of the ZIP archive"
            if at + END_RECORD.size + comment < len(data)
            else "cut short inside the ZIP end record"
        )
    end = at
    locator = at - ZIP64_LOCATOR.size
    if locator >= 0 and data[locator : locator + 4] == b"PK\x06\x07":
        _, _, zip64_at, _ = ZIP64_LOCATOR.unpack_from(data, locator)
        if zip64_at + ZIP64_END.size > locator or data[zip64_at : zip64_at + 4] != b"PK\x06\x06":
            raise damaged("its zip64 end record")
        _, size, _, _, disk, cd_disk, here, entries, cd_size, cd_offset = ZIP64_END.unpack_from(data, zip64_at)
        if zip64_at + 12 + size != locator:
            raise damaged("the size of its zip64 end record")
        end = zip64_at
    if disk or cd_disk or here != entries:
        raise damaged("an archive split over several disks")
    if cd_offset + cd_size != end:
        raise damaged(
            "the ZIP directory is not where the end record says: bytes before the archive, or a damaged directory"
        )
    return entries, cd_offset, end


def check_directory(data: bytes, infos: list, start: int, end: int) -> None:
    """The directory's entries, as their own lengths say, fill it exactly; each on the first disk."""
    at = start
    for info in infos:
        if data[at : at + 4] != b"PK\x01\x02" or at + 46 > end or info.volume:
            raise damaged(f"its ZIP directory, at {info.filename}")
        at += 46 + sum(struct.unpack_from("<3H", data, at + 28))
    if at != end:
        raise damaged("its ZIP directory: the entries' lengths do not add up to its size")


def check_names(infos: list, kind: str) -> None:
    """Part names as a part name must be: relative, without .. or backslashes or control characters, each once
    (Office parts' names compare without case, OPC's rule)."""
    seen = set()
    for info in infos:
        name = info.orig_filename
        if (
            not name
            or name.startswith("/")
            or "\\" in name
            or re.match(r"[A-Za-z]:", name)
            or ".." in name.split("/")
            or any(ord(ch) < 32 or ord(ch) == 127 for ch in name)
        ):
            raise ValueError(f"{name!r}: a part name that is not a relative path inside the archive")
        key = name.casefold() if kind in (".docx", ".pptx") else name
        if key in seen:
            raise ValueError(f"{name}: two parts of this name")
        seen.add(key)
        if info.flag_bits & ~KNOWN_FLAGS:
            what = "encrypted (password-protected)" if info.flag_bits & 0x2041 else "flags this reader does not know"
            raise ValueError(f"{name}: {what} (flags {info.flag_bits:#06x}); save the document unencrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ValueError(
                f"{name}: compressed with method {info.compress_type}, which documents do not use (only "
                f"stored or deflated)"
            )


def local_sizes(data: bytes, at: int, header: tuple) -> tuple[int, int, int]:
    """(CRC-32, compressed size, size) of a local header, the zip64 extra field's sizes where it holds them."""
    crc, packed, size, name_length, extra_length = header[6:]
    extra = data[at + LOCAL_HEADER.size + name_length : at + LOCAL_HEADER.size + name_length + extra_length]
    while len(extra) >= 4 and 0xFFFFFFFF in (packed, size):
        tag, length = struct.unpack_from("<2H", extra)
        if tag == 1 and len(extra) >= 4 + length:
            values = list(struct.unpack_from(f"<{min(length, 16) // 8}Q", extra, 4))
            size = values.pop(0) if size == 0xFFFFFFFF and values else size
            packed = values.pop(0) if packed == 0xFFFFFFFF and values else packed
        extra = extra[4 + length :]
    return crc, packed, size


def descriptor(record: bytes) -> tuple[int, int, int] | None:
    """(CRC-32, compressed size, size) of a data descriptor of these exact bytes, or None."""
    if len(record) in (16, 24) and record[:4] == b"PK\x07\x08":
        record = record[4:]
    if len(record) == 12:
        return struct.unpack("<3L", record)
    if len(record) == 20:
        return struct.unpack("<LQQ", record)
    return None


def inflate(name: str, info, packed: bytes) -> bytes:
    """A part's bytes, inflated at most one byte past its declared size, with its declared CRC-32."""
    if info.compress_type == zipfile.ZIP_STORED or not info.compress_size and not info.file_size:
        content = packed  # (an empty part may come with no compressed data at all)
        if info.compress_size != info.file_size:
            raise ValueError(
                f"{name}: a damaged part (stored, {info.compress_size} bytes, but its header says "
                f"{info.file_size} unpacked)"
            )
    else:
        inflater = zlib.decompressobj(-15)
        try:
            content = inflater.decompress(packed, info.file_size + 1)
        except zlib.error as error:
            raise ValueError(f"{name}: a damaged part (its compressed data: {error})") from None
        if len(content) > info.file_size:
            raise ValueError(
                f"{name}: a damaged part (it unpacks to more than the {info.file_size} bytes its header says)"
            )
        if not inflater.eof:
            raise ValueError(f"{name}: a damaged part (its compressed data is cut short)")
        if inflater.unused_data:
            raise ValueError(f"{name}: a damaged part ({len(inflater.unused_data)} bytes after its compressed data)")
        if len(content) < info.file_size:
            raise ValueError(
                f"{name}: a damaged part (it unpacks to {len(content)} bytes, its header says {info.file_size})"
            )
    if zlib.crc32(content) != info.CRC:
        raise ValueError(f"{name}: a damaged part (its CRC-32 checksum does not match its data)")
    return content


def verify_archive(data: bytes, kind: str, budget: Budget, depth: int = 0) -> list[tuple[zipfile.ZipInfo, bytes]]:
    """Every part of the archive `data`, in the directory's order, each checked (see above) and read once."""
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError, struct.error, IndexError) as error:
        raise damaged(f"cut short, or not a ZIP archive: {error}") from None
    except NotImplementedError as error:  # a part needing a later version of the format than zipfile reads
        raise damaged(f"{error}: a ZIP feature documents do not use") from None
    entries, cd_offset, cd_end = end_record(data)
    if entries != len(infos):
        raise damaged(f"the ZIP end record counts {entries} parts, its directory holds {len(infos)}")
    check_directory(data, infos, cd_offset, cd_end)
    budget.spend(len(data), [(info.file_size, info.compress_size) for info in infos])
    check_names(infos, kind)
    ordered = sorted(infos, key=lambda info: info.header_offset)
    bounds = [info.header_offset for info in ordered[1:]] + [cd_offset]
    if not ordered and cd_offset or ordered and ordered[0].header_offset != 0:
        raise damaged("bytes before the first part, or a damaged ZIP directory")
    starts = {}
    for info in infos:  # parts sharing their bytes: one deflated stream counted many times (a zip bomb)
        if starts.setdefault(info.header_offset, info) is not info:
            raise ValueError(
                f"{info.filename}: a damaged part (it starts where {starts[info.header_offset].filename} "
                f"does: overlapping parts)"
            )
    contents = {}
    for info, bound in zip(ordered, bounds, strict=True):
        contents[id(info)] = verify_part(data, info, bound, budget, depth)
    return [(info, contents[id(info)]) for info in infos]


def verify_part(data: bytes, info, bound: int, budget: Budget, depth: int) -> bytes:
    """One part: its local header against the directory's entry, its data between the header and `bound` (where
    the next part or the directory starts), its bytes."""
    name, at = info.filename, info.header_offset
    header = LOCAL_HEADER.unpack_from(data, at) if at + LOCAL_HEADER.size <= bound else None
    if header is None or header[0] != b"PK\x03\x04":
        raise ValueError(f"{name}: a damaged part (no local header where the ZIP directory says)")
    start = at + LOCAL_HEADER.size + header[9] + header[10]
    raw_name = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437", "replace")
    if data[at + LOCAL_HEADER.size : at + LOCAL_HEADER.size + header[9]] != raw_name:
        raise ValueError(f"{name}: a damaged part (its local header names another part)")
    if (header[2], header[3]) != (info.flag_bits, info.compress_type):
        raise ValueError(
            f"{name}: a damaged part (its local header and the ZIP directory disagree on its flags or compression)"
        )
    declared = (info.CRC, info.compress_size, info.file_size)
    if start + info.compress_size > bound:
        raise ValueError(
            f"{name}: a damaged part (its {info.compress_size} compressed bytes run past the next part "
            f"or are cut short)"
        )
    if info.flag_bits & 0x8:
        after = descriptor(data[start + info.compress_size : bound])
        if after != declared:
            raise ValueError(
                f"{name}: a damaged part (its data descriptor disagrees with the ZIP directory, or "
                f"unexplained bytes follow it)"
            )
    elif local_sizes(data, at, header) != declared:
        raise ValueError(
            f"{name}: a damaged part (its local header and the ZIP directory disagree on its checksum or sizes)"
        )
    elif start + info.compress_size != bound:
        raise ValueError(f"{name}: a damaged part ({bound - start - info.compress_size} unexplained bytes after it)")
    content = inflate(name, info, data[start : start + info.compress_size])
    if info.is_dir() and content:
        raise ValueError(f"{name}: a folder entry holding data")
    if content.startswith(b"PK\x03\x04"):  # an archive inside: checked as the document's own, against the same caps
        if depth >= MAX_NESTING:
            raise ValueError(f"{name}: archives nested more than {MAX_NESTING} deep")
        try:
            verify_archive(content, ".zip", budget, depth + 1)
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
    return content


def verified_parts(data: bytes, kind: str) -> list[tuple[zipfile.ZipInfo, bytes]]:
    """Every part of a document's archive, verified (`verify_archive`), or a ValueError naming the part and what is
    wrong with it; then the document's own rules: the kind its `mimetype` part names, no macros, no encryption."""
    why = not_a_zip(data, kind)
    if why:
        raise ValueError(why)
    parts = verify_archive(data, kind, Budget())
    contents = {info.filename: content for info, content in parts}
    mimetype = contents.get("mimetype", b"").strip().decode("ascii", "replace")
    if kind in MIMETYPES and mimetype and mimetype.removesuffix("-template") != MIMETYPES[kind]:
        raise ValueError(f"mimetype: a {mimetype[:80]!r} document, not {kind} ({MIMETYPES[kind]})")
    if any(MACROS.search(info.filename) for info, _ in parts):
        raise ValueError("refused: the document holds macros; save it without them (as .docx, .pptx, .odt, .odp)")
    if kind.startswith(".od") and b"encryption-data" in contents.get("META-INF/manifest.xml", b""):
        raise ValueError("an encrypted (password-protected) document; save it unencrypted")
    return parts


def read_archive(data: bytes, kind: str) -> tuple[list[str], Callable[[list[str]], bytes]]:
    pattern, paragraphs, runs = ARCHIVE_FORMATS[kind]
    parts = verified_parts(data, kind)
    trees, found = {}, []
    for info, content in parts:
        if re.fullmatch(pattern, info.filename):
            tree = parse_xml(info.filename, content)
            trees[info.filename] = tree
            found += [Paragraph(element, paragraphs, runs) for element in tree.iter(*paragraphs)]
    if not trees:
        raise ValueError(f"a damaged document (no {kind} content in the archive)")
    found = [paragraph for paragraph in found if paragraph.text.strip()]

    def write(translations: list[str]) -> bytes:
        for paragraph, translation in zip(found, translations, strict=True):
            paragraph.write(xml_text(translation))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as packed:
            for info, content in parts:  # from the verified bytes, in their order (an OpenDocument's mimetype first)
                clean = zipfile.ZipInfo(info.filename, info.date_time)  # no extra fields or flags from the upload
                clean.external_attr, clean.create_system = info.external_attr, info.create_system
                content = serialize(trees[info.filename]) if info.filename in trees else content
                packed.writestr(clean, content, compress_type=info.compress_type)
        return out.getvalue()

    return [paragraph.text.strip() for paragraph in found], write


TIME = r"([0-9]{1,3}):([0-9]{2}):([0-9]{2})[,.]([0-9]{1,3})"
TIMING = re.compile(TIME + " *--> *" + TIME + r"(?:\s.*)?")  # after the end, a player's position (X1:...) may follow
CUE_NUMBER = re.compile("[0-9]{1,9}")
CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f]")
# SubRip's markup: <i> <b> <u> <s> <font ...> (and their ends) and a player's {\an8}-style tags; `[^<>]*` and `[^{}]*`
# stop at the next tag's start, so scanning a line for them is linear.
SUBRIP_TAG = re.compile(r"</?(?:[ibus]|font)(?:\s[^<>]*)?>|\{\\[^{}]*\}", re.IGNORECASE)


def decode_text(data: bytes) -> str:
    """A text file's text: UTF-8 (a byte-order mark read as no text, and not written back), without NUL bytes
    (UTF-16 or a binary file under a text file's name), as the model reads text."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ValueError("it is not UTF-8 text (byte 0: a UTF-16 byte-order mark; save it as UTF-8)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"it is not UTF-8 text (byte {error.start})") from None
    if "\0" in text:
        raise ValueError(f"it is not UTF-8 text (a NUL byte at byte {data.index(0)}: UTF-16, or not text)")
    return text


def timing(number: int, line: str) -> None:
    """A SubRip timing line, checked: minutes and seconds below 60, the end not before the start."""
    match = TIMING.fullmatch(line.strip())
    if not match:
        raise ValueError(f"line {number}: expected a timing (00:00:01,000 --> 00:00:02,000)")
    h1, m1, s1, ms1, h2, m2, s2, ms2 = (
        int(group.ljust(3, "0")) if i % 4 == 3 else int(group) for i, group in enumerate(match.groups())
    )
    if max(m1, s1, m2, s2) > 59:
        raise ValueError(f"line {number}: a timing with minutes or seconds over 59 ({line.strip()[:40]!r})")
    if (h1, m1, s1, ms1) > (h2, m2, s2, ms2):
        raise ValueError(f"line {number}: the subtitle ends before it starts ({line.strip()[:40]!r})")


def cue_blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(first text line, end) of each subtitle: a number, a timing line, then text lines up to a blank line or the
    next subtitle's number and timing (a missing blank line); a timing line among the text is refused."""
    blocks, start = [], None
    for index, line in enumerate(lines + [""]):
        if start is not None and index >= start:  # a text line, or what ends the subtitle
            following = lines[index + 1] if index + 1 < len(lines) else ""
            next_cue = CUE_NUMBER.fullmatch(line.strip()) and TIMING.fullmatch(following.strip())
            if not line.strip() or next_cue:
                blocks.append((start, index))
                start = None
            elif TIMING.fullmatch(line.strip()):
                raise ValueError(f"line {index + 1}: a timing among a subtitle's text (its number missing?)")
        if line.strip() and start is None:
            if not CUE_NUMBER.fullmatch(line.strip()):
                raise ValueError(
                    f"line {index + 1}: expected a subtitle number (digits 0-9, at most 9), got {line.strip()[:40]!r}"
                )
            timing(index + 2, lines[index + 1] if index + 1 < len(lines) else "")
            start = index + 2
    return blocks


def markup_around(line: str) -> tuple[str, str, str]:
    """A subtitle line as (its leading tags, its text, its trailing tags): the tags are kept, the text translated.
    Where a tag inside the text would go in its translation is unknown: it is moved to the text's start (an end tag
    to the text's end), so every tag is still written, each tag its end."""
    tags = list(SUBRIP_TAG.finditer(line))
    i, j, start, end = 0, len(tags), 0, len(line)
    while i < j and not line[start : tags[i].start()].strip():
        start, i = tags[i].end(), i + 1
    while j > i and not line[tags[j - 1].end() : end].strip():
        end, j = tags[j - 1].start(), j - 1
    inner = [tag.group() for tag in tags[i:j]]
    lead = line[:start].strip() + "".join(tag for tag in inner if not tag.startswith("</"))
    trail = "".join(tag for tag in inner if tag.startswith("</")) + line[end:].strip()
    return lead, " ".join(SUBRIP_TAG.sub("", line[start:end]).split()), trail


def read_subtitles(data: bytes) -> tuple[list[str], Callable[[list[str]], bytes]]:
    """SubRip: blocks of a number, a timing line and text lines, a blank line between (lines ending in CR LF, LF or
    CR; the first of these found is written back); SubRip's tags are kept around each line's text, not translated."""
    text = decode_text(data)
    newline = next((end for end in ("\r\n", "\n", "\r") if end in text), "\n")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    marked = [markup_around(line) for line in lines]
    blocks = [(first, end) for first, end in cue_blocks(lines) if any(marked[i][1] for i in range(first, end))]

    def write(translations: list[str]) -> bytes:
        out = list(lines)
        for (first, end), translation in reversed(list(zip(blocks, translations, strict=True))):
            words = " ".join(CONTROLS.sub("", translation).split())  # a NUL or a control is no subtitle text
            pieces = distribute(words, [len(marked[i][1]) for i in range(first, end)])
            written = [lead + piece.strip() + trail for (lead, _, trail), piece in zip(marked[first:end], pieces)]
            out[first:end] = [line for line in written if line]  # a blank line would end the subtitle
        return newline.join(out).encode("utf-8")

    return [" ".join(marked[i][1] for i in range(first, end) if marked[i][1]) for first, end in blocks], write


def read_document(kind: str, data: bytes) -> tuple[list[str], Callable[[list[str]], bytes]]:
    """A document's paragraphs to translate, and the function that writes the document back with their
    translations (in the same order). `kind`: its extension, one of DOCUMENTS."""
    return read_subtitles(data) if kind == ".srt" else read_archive(data, kind)
