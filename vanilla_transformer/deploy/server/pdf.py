"""PDF documents for `/translate_file`, as LibreTranslate takes them: the `pdf` extra (pypdf, BSD-3-Clause, pure
Python, no dependencies of its own); `.pdf` is listed and taken only where it is installed (`PDF`).

The upload is verified before any work, in memory, under pypdf's own limits held to the documents' caps
(`documents.Budget`: 64 MiB unpacked, 5,000 objects, 200 times packed): read strictly (a damaged cross-reference
table, a cut file, an object that is not where the table says is refused, never repaired by guessing); refused when
encrypted; every object read once and every stream but images and embedded files decoded once, within the caps (a
decompression bomb); the page tree a tree (each page once: a page-count bomb); each page's content stream and fonts
read. Refused with a ValueError naming the problem (`/translate_file` answers 400).

Each page's text (in its own content stream, upright, in a font whose characters are known) is read operator by
operator: its runs, where they stand (the text and graphics state followed: `cm`, `q`/`Q`, `Tm`, `Td`, `Tf`, ...),
grouped into lines and the lines into boxes (a paragraph, a heading, a cell); each box is one text to translate. The
translation is written back where the box stood: its text operators replaced by moves of the same width (text drawn
after them stays where it was), and the translation drawn over the box in a standard font (Helvetica, Times or
Courier, bold or italic, as the original font's name says; WinAnsi: a character it cannot show loses its accent, or
is a `?`), in the box's colour, wrapped to its width and shrunk until it fits its height.
Images, vector graphics, text in form XObjects, rotated text and everything else on the page are kept as they were.

The result is a new document of the same pages: no catalog entry of the upload (no JavaScript, no OpenAction, no
embedded files, no forms, no outline); on the pages, every additional action (`/AA`), JavaScript, embedded file,
action other than a link to a page or to an http(s) or mailto address, and file-attachment or multimedia annotation
is dropped."""

import codecs
import importlib.util
import io
import logging
import math
import re
import unicodedata
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache, cached_property

from .documents import MAX_ENTRIES, MAX_UNPACKED, NOT_XML, OLE_MAGIC, SIGNATURES, Budget, Refusal, damaged

PDF = (".pdf",) if importlib.util.find_spec("pypdf") else ()
SHOWN = (b"Tj", b"TJ", b"'", b'"')  # the operators showing text
MOVES = (b"Td", b"TD", b"T*", b"Tm", b"'", b'"')  # those moving to a line's start
IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
MIN_SIZE = 4.0  # points: a translation is shrunk to fit its box down to this size, no further
MAX_SIZE = 10_000.0  # points: text larger than this (larger than any page) is left as it is
LARGEST = 1e9  # a number larger than this (or not finite) in a page's text operators: the operator is ignored
ACTIVE = ("/AA", "/OpenAction", "/JS", "/JavaScript", "/EmbeddedFiles", "/EF", "/RichMediaContent", "/XFA", "/Next")
DROPPED = {"/FileAttachment", "/RichMedia", "/Screen", "/Movie", "/Sound", "/3D"}  # annotations
WEB = ("http://", "https://", "mailto:")
# The standard fonts a translation is drawn in (every viewer has them), by family: regular, bold, italic, both
STANDARD = {
    "serif": ("Times-Roman", "Times-Bold", "Times-Italic", "Times-BoldItalic"),
    "mono": ("Courier", "Courier-Bold", "Courier-Oblique", "Courier-BoldOblique"),
    "sans": ("Helvetica", "Helvetica-Bold", "Helvetica-Oblique", "Helvetica-BoldOblique"),
}
# Font names (TeX's too: cmr10, cmbx12, cmtt10; cm-super's sfrm, Latin Modern's lmroman): their family and style
TEX = r"(^|\+)(cm|sf|lm)"
SERIF = re.compile(
    rf"times|(?<!sans)(?<!sans )(?<!sans-)serif|roman|georgia|garamond|cambria|palatino|minion|book ?antiqua|charter"
    rf"|{TEX}(r|bx|b|ti|sl|csc)\d",
    re.I,
)
MONO = re.compile(rf"courier|mono|consol|{TEX}tt\d", re.I)
BOLD = re.compile(rf"bold|black|heavy|demi|{TEX}(bx|b)\d", re.I)
ITALIC = re.compile(rf"italic|oblique|slanted|{TEX}(ti|sl)\d", re.I)
ITEM = re.compile(r"([•◦▪‣∙·*–—-]|\(?\d{1,3}[.)])\s")  # a list item's bullet or number, starting a line


def value(node, key: str, default=None):
    """A dictionary's entry, an indirect object's own value (pypdf's `get` gives the reference), or `default`."""
    from pypdf.generic import DictionaryObject

    found = node.get(key) if isinstance(node, DictionaryObject) else None
    return default if found is None else found.get_object()


@contextmanager
def reading(what: str):
    """pypdf's errors on a hostile file as a ValueError naming `what` and the error: pypdf raises errors of many
    kinds on a damaged file (its own, and ValueError, KeyError, RecursionError, ...); a refusal of ours passes."""
    from pypdf.errors import LimitReachedError

    try:
        yield
    except (Refusal, MemoryError):
        raise
    except LimitReachedError as error:
        raise Refusal(f"refused: {what}: {error} (a decompression or page-count bomb?)") from None
    except Exception as error:  # noqa: BLE001 (any error of the library on hostile bytes is the file's damage)
        detail = " ".join(str(error).split())[:200]
        raise damaged(f"{what}: {type(error).__name__}{': ' if detail else ''}{detail}") from None


def pypdf_limits(size: int) -> dict:
    """pypdf's own limits (`pypdf.Configuration`) held to the documents' caps: no stream decoded past `size` bytes,
    no external decoder run (jbig2dec), the page tree and arrays within the caps on objects."""
    return {
        "maximum_declared_stream_length": MAX_UNPACKED,
        "array_based_stream_maximum_output_length": size,
        "zlib_maximum_output_length": size,
        "lzw_maximum_output_length": size,
        "run_length_maximum_output_length": size,
        "brotli_maximum_output_length": size,
        "jbig2_maximum_output_length": size,
        "image_maximum_buffer_size": size,
        "jbig2dec_binary": None,
        "page_tree_maximum_entries": MAX_ENTRIES,
        "page_tree_maximum_page_entries": MAX_ENTRIES,
    }


def not_a_pdf(data: bytes) -> str | None:
    """Why `data` cannot be a PDF at all (an empty file, another format under the extension, bytes before the
    header), or None."""
    if not data:
        return "an empty file"
    others = {**SIGNATURES, OLE_MAGIC: "an Office document (.doc, .ppt or encrypted)", b"PK\x03\x04": "a ZIP archive"}
    for magic, what in others.items():
        if magic != b"%PDF" and data.startswith(magic):
            return f"{what}, not a .pdf file"
    if not data.startswith(b"%PDF-"):
        at = data.find(b"%PDF-", 0, 1024)
        if at > 0:
            return f"a damaged document ({at} bytes before the PDF header)"
        return f"not a .pdf file (a PDF starts with %PDF-; this one starts {data[:8]!r})"
    return None


def opened(data: bytes):
    """The upload's reader and pages, verified (the module's docstring) before any work."""
    from pypdf import PdfReader, apply_configuration

    why = not_a_pdf(data)
    if why:
        raise ValueError(why)
    # pypdf logs what it finds wrong in an upload (a font's whole encoding table, at error level): the client's 400
    # says so, and the server's log is not for a client to fill
    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
    with apply_configuration(**pypdf_limits(MAX_UNPACKED)), reading("the file"):
        reader = PdfReader(io.BytesIO(data), strict=True)
        if reader.is_encrypted:
            raise Refusal("an encrypted (password-protected) document; save it unencrypted")
        check_offsets(reader, data)
        verify_objects(reader, len(data))
        check_page_tree(reader)
        pages = list(reader.pages)
    if not pages:
        raise damaged("no pages")
    return reader, pages


def check_offsets(reader, data: bytes) -> None:
    """Each object where the cross-reference table says (its number, generation and `obj` there): pypdf would look
    for one elsewhere ("repaired"), a damage this reader does not guess its way around."""
    for generation, table in reader.xref.items():
        for idnum, offset in table.items():
            if not re.match(rb"\s*%d\s+%d\s+obj\b" % (idnum, generation), data[offset : offset + 64]):
                raise damaged(f"object {idnum} is not where its cross-reference table says (byte {offset})")


def verify_objects(reader, packed: int) -> None:
    """Every object of the cross-reference table read once, and every stream but images and embedded files (never
    decoded: copied as they are) decoded once, against one budget (`documents.Budget`): objects, bytes, ratios."""
    from pypdf import apply_configuration
    from pypdf.errors import LimitReachedError
    from pypdf.generic import IndirectObject, StreamObject

    budget = Budget("objects", "a decompression bomb")
    refs = [(idnum, generation) for generation, table in reader.xref.items() for idnum in table]
    refs += [(idnum, 0) for idnum in reader.xref_objStm]  # after the object streams holding them
    budget.spend(packed, [], len(refs))
    for idnum, generation in refs:
        found = reader.get_object(IndirectObject(idnum, generation, reader))
        if not isinstance(found, StreamObject) or "/Image" == value(found, "/Subtype"):
            continue
        if "/EmbeddedFile" == value(found, "/Type"):
            continue
        with apply_configuration(**pypdf_limits(budget.size + 1)):
            try:
                size = len(found.get_data())
            except LimitReachedError:
                raise budget.refuse(MAX_UNPACKED + 1, MAX_ENTRIES - budget.parts) from None
        budget.spend(packed, [(size, int(value(found, "/Length", 0)))], 0)


def check_page_tree(reader) -> None:
    """The page tree is a tree: each node (a page or a node of pages) an object of its own, reached once."""
    from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject

    pending, seen = [reader.trailer["/Root"].raw_get("/Pages")], set()
    while pending:
        ref = pending.pop()
        if not isinstance(ref, IndirectObject):
            raise damaged("a page tree node that is not an object of its own")
        if ref.idnum in seen:
            raise Refusal(f"refused: its page tree reaches object {ref.idnum} twice (a page-count bomb?)")
        seen.add(ref.idnum)
        node = ref.get_object()
        if not isinstance(node, DictionaryObject):
            raise damaged(f"page tree node {ref.idnum} is not a dictionary")
        if "/Pages" == value(node, "/Type"):
            kids = value(node, "/Kids")
            if not isinstance(kids, ArrayObject):
                raise damaged(f"page tree node {ref.idnum} has no /Kids array")
            pending += list(kids)


# ------------------------------------------------------------------------------------------ reading a page's text
@dataclass
class State:
    """The graphics and text state a page's text depends on (saved by `q`, restored by `Q`)."""

    ctm: tuple = IDENTITY
    font: str | None = None
    size: float = 0.0
    tc: float = 0.0  # character spacing
    tw: float = 0.0  # word spacing
    th: float = 1.0  # horizontal scaling
    tl: float = 0.0  # leading
    rise: float = 0.0
    mode: int = 0  # rendering mode: 3 invisible, 4-7 clipping
    color: tuple | None = None  # the fill colour's operator and operands (g, rg, k), None where another


@dataclass
class Run:
    """The text one operator shows: where (user space: its baseline's start and end, the font size), what, how."""

    index: int
    text: str
    x0: float
    x1: float
    y: float
    size: float
    advance: float  # its width in text space, to move by in its place (`moved_by`)
    scale: float  # the font size times the horizontal scaling at the operator
    color: tuple | None
    mode: int
    upright: bool  # upright text, its font's characters known
    standard: str = "Helvetica"  # the standard font its translation is drawn in (`standard_font`)


def multiply(m: tuple, n: tuple) -> tuple:
    """m x n, PDF's 3x3 matrices as their six numbers."""
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (
        a * a2 + b * c2,
        a * b2 + b * d2,
        c * a2 + d * c2,
        c * b2 + d * d2,
        e * a2 + f * c2 + e2,
        e * b2 + f * d2 + f2,
    )


def numbers(operands: list, count: int) -> list[float] | None:
    """The operands as `count` numbers, or None where they are not (the operator is then ignored, as viewers do)."""
    from pypdf.generic import FloatObject, NumberObject

    if not isinstance(operands, list) or len(operands) < count:
        return None
    found = []
    for operand in operands[:count]:
        if not isinstance(operand, (NumberObject, FloatObject)) or not abs(operand) <= LARGEST:
            return None
        found.append(float(operand))
    return found


def set_state(state: State, operator: bytes, operands: list) -> None:
    """The state an operator sets (not the text position: `moved`)."""
    one = numbers(operands, 1)
    if operator == b"cm" and numbers(operands, 6):
        state.ctm = multiply(tuple(numbers(operands, 6)), state.ctm)
    elif operator == b"Tf" and len(operands) >= 2 and numbers(operands[1:], 1):
        state.font, state.size = str(operands[0]), numbers(operands[1:], 1)[0]
    elif operator in (b"Tc", b"Tw", b"TL", b"Ts") and one:
        setattr(state, {b"Tc": "tc", b"Tw": "tw", b"TL": "tl", b"Ts": "rise"}[operator], one[0])
    elif operator == b"Tz" and one:
        state.th = one[0] / 100
    elif operator == b"Tr" and one:
        state.mode = int(one[0]) if 0 <= one[0] <= 7 else state.mode
    elif operator in (b"g", b"rg", b"k") and numbers(operands, {b"g": 1, b"rg": 3, b"k": 4}[operator]):
        state.color = (operator, tuple(numbers(operands, {b"g": 1, b"rg": 3, b"k": 4}[operator])))
    elif operator in (b"cs", b"sc", b"scn"):
        state.color = None


def moved(state: State, operator: bytes, operands: list, line: tuple) -> tuple:
    """The text line matrix after a move to a line's start (`Td`, `TD`, `T*`, `Tm`, `'`, `"`)."""
    if operator == b"Tm":
        return tuple(numbers(operands, 6) or line)
    if operator == b'"' and numbers(operands, 2):
        state.tw, state.tc = numbers(operands, 2)
    if operator in (b"Td", b"TD"):
        offset = numbers(operands, 2)
        if offset is None:
            return line
        if operator == b"TD":
            state.tl = -offset[1]
    else:
        offset = [0.0, -state.tl]
    return multiply((1.0, 0.0, 0.0, 1.0, *offset), line)


def decoded(font, raw: bytes) -> tuple[str, float, int, int]:
    """The characters `raw` shows in `font` (a pypdf Font), their width (thousandths of the font size), how many
    single-byte spaces (word spacing applies to them) and how many characters."""
    if isinstance(font.encoding, str):
        codes = raw.decode(font.encoding, "replace")
        measured, spaces = codes, 0
    else:
        codes = "".join(str(font.encoding.get(byte, chr(byte))) for byte in raw)
        measured, spaces = "".join(map(chr, raw)), raw.count(32)
    text = "".join(str(font.character_map.get(code, code)) for code in codes)
    spaced = [char for char in measured if char == font.space_char]  # (measured as pypdf's text extraction does)
    width = width_of(font, [char for char in measured if char != font.space_char]) + len(spaced) * font.space_width
    return text, width, spaces, len(codes)


def width_of(font, text) -> float:
    """The width of `text` (its characters) in `font` (a pypdf Font), in thousandths of the font size."""
    widths = font.character_widths
    default = widths.get("default", 500)
    return sum(widths.get(char, default) for char in text)


def shown(state: State, font, operand, index: int, at: tuple) -> tuple[Run, tuple]:
    """The run a text-showing operator draws (`operand`: its string or TJ's array) and the text matrix after it."""
    from pypdf.generic import ArrayObject, ByteStringObject, TextStringObject

    pieces, text, advance = operand if isinstance(operand, ArrayObject) else [operand], "", 0.0
    for piece in pieces:
        if (shift := numbers([piece], 1)) is not None:
            advance -= shift[0] / 1000 * state.size * state.th
            text += " " if shift[0] <= -250 and text and not text.endswith(" ") else ""
        elif isinstance(piece, (TextStringObject, ByteStringObject)) and font is not None:
            raw = piece.original_bytes if isinstance(piece, TextStringObject) else bytes(piece)
            chars, width, spaces, count = decoded(font, raw)
            text += chars
            advance += (width / 1000 * state.size + state.tc * count + state.tw * spaces) * state.th
    a, b, c, d, x, y = multiply((1.0, 0.0, 0.0, 1.0, 0.0, state.rise), multiply(at, state.ctm))
    upright = font is not None and a > 0 and d > 0 and abs(b) + abs(c) <= 1e-6 * (a + d) and state.mode <= 3
    run = Run(index, text, x, x + advance * a, y, state.size * d, advance, state.size * state.th, state.color,
              state.mode, upright, standard_font(font))  # fmt: skip
    return run, multiply((1.0, 0.0, 0.0, 1.0, advance, 0.0), at)


def standard_font(font) -> str:
    """The standard font nearest a pypdf Font, by its name: Times, Courier or Helvetica, bold and italic or not."""
    name = getattr(font, "name", "") or ""
    family = "serif" if SERIF.search(name) else "mono" if MONO.search(name) else "sans"
    return STANDARD[family][bool(BOLD.search(name)) + 2 * bool(ITALIC.search(name))]


@cache
def metrics(standard: str):
    """A standard font's widths (a pypdf Font)."""
    from pypdf.generic._font import Font

    return Font.from_core_font_name("/" + standard)


def page_runs(operations: list, fonts: dict) -> list[Run]:
    """The runs of text a page's own content stream (`operations`) shows, in its order (`fonts`: `page_fonts`)."""
    state, saved, runs = State(), [], []
    line = at = IDENTITY  # the text line matrix (where the line starts) and the text matrix (where the next glyph)
    for index, (operands, operator) in enumerate(operations):
        if operator == b"q":
            saved.append(replace(state))
        elif operator == b"Q":
            state = saved.pop() if saved else state
        elif operator == b"BT":
            line = at = IDENTITY
        elif operator in MOVES:
            line = at = moved(state, operator, operands, line)
        else:
            set_state(state, operator, operands)
        if operator in SHOWN and operands:
            run, at = shown(state, fonts.get(state.font), operands[-1], index, at)
            runs.append(run)
    return runs


def page_fonts(page) -> dict:
    """The page's fonts by resource name (pypdf Fonts), those whose characters cannot be known left out (a Type 3
    font, one pypdf cannot read): their text is kept as it is."""
    from pypdf.generic import DictionaryObject
    from pypdf.generic._font import Font  # (pypdf's reading of a font's encoding, character map and widths)

    fonts = value(value(page, "/Resources"), "/Font")
    found = {}
    for name, font in fonts.items() if isinstance(fonts, DictionaryObject) else ():
        font = font.get_object()
        if isinstance(font, DictionaryObject) and "/Type3" != value(font, "/Subtype"):
            read = Font.from_font_resource(font)
            if read.interpretable and (not isinstance(read.encoding, str) or known_codec(read.encoding)):
                found[str(name)] = read
    return found


def known_codec(name: str) -> bool:
    """Whether Python decodes bytes in the codec `name` (a CID font's, as pypdf names it)."""
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


# ------------------------------------------------------------------------------------------ lines and boxes
def lines_of(runs: list[Run]) -> list[list[Run]]:
    """Runs following each other on one baseline, not more than two ems apart, as lines."""
    lines: list[list[Run]] = []
    for run in runs:
        last = lines[-1][-1] if lines else None
        size = max(run.size, last.size) if last else 0
        if last and abs(run.y - last.y) <= 0.3 * size and -0.5 * size <= run.x0 - last.x1 <= 2 * size:
            lines[-1].append(run)
        else:
            lines.append([run])
    return lines


def line_text(line: list[Run]) -> str:
    text = ""
    for before, run in zip([None, *line], line):
        gap = before is not None and run.x0 - before.x1 > 0.15 * run.size
        text += " " if gap and not text.endswith(" ") and not run.text.startswith(" ") else ""
        text += run.text
    return " ".join(NOT_XML.sub(" ", text).split())


def standard_of(runs: list[Run]) -> str:
    """The standard font most characters of `runs` are to be drawn in (a list item's words', not its bullet's)."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.standard] = counts.get(run.standard, 0) + len(run.text.strip())
    return max(counts, key=counts.__getitem__)


class Box:
    """Lines one below the other, of about one size, overlapping: a paragraph, a heading, a cell (its size and span
    kept as lines are added: checking a line takes no longer in a box of many)."""

    def __init__(self, line: list[Run]):
        self.lines, self.size = [line], max(run.size for run in line)
        self.x0, self.x1 = line[0].x0, max(run.x1 for run in line)

    def add(self, line: list[Run]) -> None:
        self.lines.append(line)
        self.x0, self.x1 = min(self.x0, line[0].x0), max(self.x1, max(run.x1 for run in line))

    @property
    def leading(self) -> float:
        first, last = self.lines[0][0].y, self.lines[-1][0].y
        return (first - last) / (len(self.lines) - 1) if len(self.lines) > 1 else 1.2 * self.size

    def takes(self, line: list[Run]) -> bool:
        """Whether `line` continues the box: below its last line, about one line further, of about its size and of
        its font's family, starting under it and not indented further than the line before (a paragraph's first
        line), not a list item."""
        size, gap, last = max(run.size for run in line), self.lines[-1][0].y - line[0].y, self.lines[-1][0]
        family = standard_of(line).split("-")[0]
        return (
            abs(size - self.size) <= 0.15 * self.size
            and 0.5 * self.size <= gap <= 1.8 * self.size
            and (len(self.lines) == 1 or abs(gap - self.leading) <= 0.25 * self.size)
            and family == standard_of(self.lines[-1]).split("-")[0]
            and self.x0 - 2 * self.size <= line[0].x0 <= last.x0 + 0.5 * self.size
            and line[0].x0 < self.x1
            and not ITEM.match(line_text(line))
        )

    @cached_property
    def standard(self) -> str:
        """The standard font its translation is drawn in: most of its characters' (`standard_font`)."""
        return standard_of([run for line in self.lines for run in line])

    @cached_property
    def text(self) -> str:
        """The lines' text, a space between them, but a word cut by a hyphen at a line's end joined again."""
        pieces: list[str] = []
        for line in map(line_text, self.lines):
            last = pieces[-1] if pieces else ""
            if last.endswith("-") and len(last) > 1 and last[-2].isalpha() and line[:1].islower():
                pieces[-1] = last[:-1]
            elif pieces:
                pieces.append(" ")
            pieces.append(line)
        return " ".join("".join(pieces).split())


def boxes_of(runs: list[Run]) -> list[Box]:
    """The page's boxes of upright, visible or invisible (not clipping) text, in the content stream's order."""
    boxes: list[Box] = []
    kept = [run for run in runs if run.upright and 0 < run.size <= MAX_SIZE and math.isfinite(run.x0 + run.x1 + run.y)]
    for line in lines_of(kept):
        if boxes and boxes[-1].takes(line):
            boxes[-1].add(line)
        else:
            boxes.append(Box(line))
    return [box for box in boxes if box.text.strip()]


# ------------------------------------------------------------------------------------------ writing a page
def winansi(text: str) -> str:
    """`text` in the characters the standard fonts' WinAnsi encoding shows (no control characters): another loses its
    accent, or becomes `?`."""
    text = " ".join(NOT_XML.sub(" ", text).split())
    if text.encode("cp1252", "replace").decode("cp1252") == text:
        return text
    out = []
    for char in text:
        try:
            char.encode("cp1252")
        except UnicodeEncodeError:
            char = unicodedata.normalize("NFKD", char).encode("cp1252", "ignore").decode("cp1252")[:1] or "?"
        out.append(char)
    return "".join(out)


def wrapped(words: list[str], widths: list[float], space: float, limit: float) -> list[list]:
    """`words` (`widths` wide) in lines, each [its words, its width], no wider than `limit` (but a word wider alone)."""
    lines: list[list] = []
    for word, wide in zip(words, widths):
        if lines and lines[-1][1] + space + wide <= limit:
            lines[-1][0].append(word)
            lines[-1][1] += space + wide
        else:
            lines.append([[word], wide])
    return lines


def fitted(text: str, box: Box) -> tuple[float, list[str]]:
    """The font size and lines `text` takes in the box's standard font to fit it: wrapped to its width, at the box's
    size or the largest smaller one (not below MIN_SIZE) at which its lines fit its height (found by halving: a box of
    any size and text takes a few wrappings)."""
    width, height = max(box.x1 - box.x0, box.size), box.lines[0][0].y - box.lines[-1][0].y + box.size
    ratio, words = box.leading / box.size, text.split(" ")
    font = metrics(box.standard)
    widths, space = [width_of(font, word) for word in words], width_of(font, " ")

    def laid_out(size: float) -> tuple[bool, list]:
        limit = width / size * 1000
        lines = wrapped(words, widths, space, limit)
        return size * (1 + ratio * (len(lines) - 1)) <= height * 1.02 and all(w <= limit for _, w in lines), lines

    size, (fits, lines) = box.size, laid_out(box.size)
    if not fits:
        low, high = min(MIN_SIZE, box.size), box.size  # (the smallest is taken even where it does not fit)
        for _ in range(16):
            middle = (low + high) / 2
            low, high = (middle, high) if laid_out(middle)[0] else (low, middle)
        size, lines = low, laid_out(low)[1]
    return size, [" ".join(line) for line, _ in lines]


def drawn(box: Box, translation: str, font: str) -> list:
    """The operators drawing `translation` over the box (its first baseline, its colour, visible or not)."""
    from pypdf.generic import ByteStringObject, FloatObject, NameObject, NumberObject

    size, lines = fitted(winansi(translation), box)
    first, top = box.lines[0][0], box.lines[0][0].y + 0.75 * box.size
    operator, values = first.color or (b"g", (0.0,))
    ops = [([], b"BT"), ([NameObject(font), FloatObject(round(size, 3))], b"Tf")]
    ops += [
        ([FloatObject(round(v, 4)) for v in values], operator),
        ([NumberObject(3 if first.mode == 3 else 0)], b"Tr"),
    ]
    ops += [([FloatObject(round(box.x0, 3)), FloatObject(round(top - 0.75 * size, 3))], b"Td")]
    ops += [([FloatObject(round(size * box.leading / box.size, 3))], b"TL")]
    for n, line in enumerate(lines):
        ops += [([], b"T*")] if n else []
        ops += [([ByteStringObject(line.encode("cp1252"))], b"Tj")]
    return [*ops, ([], b"ET")]


def moved_by(run: Run, operands: list, operator: bytes) -> list:
    """What stands in for a translated run's operator: the move it made, without its text."""
    from pypdf.generic import ArrayObject, FloatObject

    ops = [([operands[0]], b"Tw"), ([operands[1]], b"Tc")] if operator == b'"' and len(operands) >= 3 else []
    ops += [([], b"T*")] if operator in (b"'", b'"') else []
    if run.scale:
        ops += [([ArrayObject([FloatObject(round(-run.advance * 1000 / run.scale, 3))])], b"TJ")]
    return ops


def rewritten(operations: list, runs: list[Run], overlay: list) -> list:
    """The page's operators, the translated runs' replaced (`moved_by`), closed (text objects ended, every saved
    state restored), then the overlay in the page's own space."""
    replaced = {run.index: run for run in runs}
    out, depth, in_text = [([], b"q")], 1, False
    for index, (operands, operator) in enumerate(operations):
        out += moved_by(replaced[index], operands, operator) if index in replaced else [(operands, operator)]
        depth = depth + 1 if operator == b"q" else max(0, depth - 1) if operator == b"Q" else depth
        in_text = operator == b"BT" or in_text and operator != b"ET"
    closing = [([], b"ET")] if in_text else []
    return out + closing + [([], b"Q")] * depth + [([], b"q"), *overlay, ([], b"Q")]


def added_font(fonts, standard: str) -> str:
    """The name of a standard font (WinAnsi) added to a page's fonts (`fonts`), one the page did not use."""
    from pypdf.generic import DictionaryObject, NameObject

    name = next(name for n in range(1000) if (name := f"/VT{standard}{n or ''}") not in fonts)
    fonts[NameObject(name)] = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/" + standard),
            NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
        }
    )
    return name


def write_page(writer, page, operations: list, boxes: list[Box], translations: list[str]) -> None:
    """The writer's copy of a page, its boxes' text replaced by their translations."""
    from pypdf.generic import ContentStream, DictionaryObject, NameObject

    resources = page.setdefault(NameObject("/Resources"), DictionaryObject()).get_object()
    fonts = resources.setdefault(NameObject("/Font"), DictionaryObject()).get_object()
    names = {standard: added_font(fonts, standard) for standard in {box.standard for box in boxes}}
    overlay = [op for box, text in zip(boxes, translations) for op in drawn(box, text, names[box.standard])]
    content = ContentStream(None, writer)
    content.operations = rewritten(operations, [run for box in boxes for line in box.lines for run in line], overlay)
    page.replace_contents(content)
    page.compress_content_streams()


# ------------------------------------------------------------------------------------------ active content
def safe_action(action) -> bool:
    """A link to a page, or to an http(s) or mailto address: the only actions kept."""
    from pypdf.generic import DictionaryObject

    action = action.get_object()
    if not isinstance(action, DictionaryObject):
        return False
    kind, uri = value(action, "/S"), value(action, "/URI")
    return "/GoTo" == kind or "/URI" == kind and str(uri).lower().startswith(WEB)


def dropped(annotation) -> bool:
    """A file attachment or multimedia annotation (or not an annotation at all): dropped, not kept."""
    from pypdf.generic import DictionaryObject

    return not isinstance(annotation, DictionaryObject) or value(annotation, "/Subtype") in DROPPED


def scrub(*roots) -> None:
    """Every dictionary reachable from `roots` without active content (the module's docstring)."""
    from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject, NameObject

    pending, seen = list(roots), set()
    while pending:
        node = pending.pop()
        node = node.get_object() if isinstance(node, IndirectObject) else node
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, DictionaryObject):
            for key in ACTIVE:
                node.pop(key, None)
            if "/A" in node and not safe_action(node.raw_get("/A")):
                del node["/A"]
            annotations = value(node, "/Annots")
            if isinstance(annotations, ArrayObject):
                node[NameObject("/Annots")] = ArrayObject(a for a in annotations if not dropped(a.get_object()))
            pending += [item for _, item in dict.items(node)]
        elif isinstance(node, ArrayObject):
            pending += list(node)


# ------------------------------------------------------------------------------------------ the document
def read_pdf(data: bytes) -> tuple[list[str], Callable[[list[str]], bytes]]:
    """A PDF's boxes of text to translate, and the function that writes the document back with their translations
    (in the same order), or a ValueError naming what is wrong with it."""
    from pypdf import apply_configuration
    from pypdf.generic import ContentStream

    reader, pages = opened(data)
    found = []
    for number, page in enumerate(pages, 1):
        with apply_configuration(**pypdf_limits(MAX_UNPACKED)), reading(f"page {number}"):
            contents = page.get_contents()
            operations = ContentStream(contents, reader).operations if contents is not None else []
            fonts = page_fonts(page)
        found.append((operations, boxes_of(page_runs(operations, fonts))))
    texts = [box.text for _, boxes in found for box in boxes]
    return texts, lambda translations: written(reader, pages, found, translations)


def written(reader, pages: list, found: list, translations: list[str]) -> bytes:
    """The document of `pages` (`read_pdf`'s `found`: each page's operators and boxes), their boxes' text replaced
    by `translations` and scrubbed of active content (`scrub`): in the upload's objects before any is copied, so that
    no copy (even one left unreferenced) carries any, and in the result. The pages are copied before their
    annotations, so that a link to another page is to its copy (not to a copy of its original)."""
    from pypdf import PdfWriter, apply_configuration
    from pypdf.generic import NameObject

    left, writer = iter(translations), PdfWriter()
    with apply_configuration(**pypdf_limits(MAX_UNPACKED)), reading("writing it"):
        scrub(*pages)  # (pypdf's pages: copies of the page dictionaries, the objects below them shared)
        copies = [writer.add_page(page, excluded_keys=("/Annots", "/B")) for page in pages]
        for page, copy, (operations, boxes) in zip(pages, copies, found, strict=True):
            if "/Annots" in page:
                copy[NameObject("/Annots")] = page.raw_get("/Annots").clone(writer)
            mine = [next(left) for _ in boxes]
            if boxes:
                write_page(writer, copy, operations, boxes, mine)
        scrub(writer.root_object)
        writer.compress_identical_objects(remove_duplicates=False, remove_unreferenced=True)
        out = io.BytesIO()
        writer.write(out)
    return out.getvalue()
