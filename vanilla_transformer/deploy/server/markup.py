"""What of a text or an HTML document the model translates, and how the translations go back in.

`segments(text, "text")`: each non-blank line is one sentence (its surrounding whitespace and the line ends kept).
`segments(document, "html")`: the text nodes, found as an HTML5 tokenizer finds them, in one pass (time linear in
the document); tags, attributes (`alt` and `title` included, as LibreTranslate leaves them), comments, CDATA
sections, processing instructions, the contents of scripts and styles (up to the end tag a browser ends them at) and
entities in markup are kept byte for byte, and so is every text that is not prose (`NOT_PROSE`: code, preformatted
text, scripts, styles, templates, ...) or that its author marked as not to be translated (`translate="no"`, or the
class `notranslate`; `translate="yes"` inside one turns translation back on). Each other text node with a letter or
digit in it is one sentence (entities decoded, whitespace runs as one space; the translation escaped back). The
parser is lenient as browsers are: markup that is not well-formed (an unclosed tag or comment, a stray `<`) is read
as HTML5 parsers read it, never refused. `rebuild(segments, translations)` puts one translation per sentence
back in order.
"""

import html
import re
from collections import Counter

TEXT_FORMATS = ("text", "html")  # LibreTranslate's `format` field: what `segments` reads
# Elements whose contents are not prose, never translated (LibreTranslate's translatehtml skips address, applet,
# audio, canvas, code, embed, script, style, time and video; code-like and preformatted text too, whose spacing a
# translation would lose)
NOT_PROSE = frozenset(
    {
        "address",
        "applet",
        "audio",
        "canvas",
        "code",
        "embed",
        "kbd",
        "math",
        "object",
        "pre",
        "samp",
        "script",
        "style",
        "template",
        "time",
        "var",
        "video",
        "xmp",
        "plaintext",
        "listing",
    }
)
VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
        "keygen",
    }
)  # elements without an end tag: they hold nothing


def has_words(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def text_segments(text: str) -> list[tuple[str, str, str]]:
    """(kind, text, raw) for each part of `text`: "sentence" (a line's content) or "keep" (whitespace, line ends)."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        content = body.strip()
        if not has_words(content):
            out.append(("keep", line, line))
            continue
        start = body.index(content[0])
        out += [
            ("keep", body[:start], body[:start]),
            ("sentence", content, content),
            ("keep", line[start + len(content) :], line[start + len(content) :]),
        ]
    return out


RAW_TEXT = frozenset({"script", "style", "xmp", "iframe", "noembed", "noframes", "plaintext"})  # text up to their
RCDATA = frozenset({"title", "textarea"})  # end tag is one node (raw: kept as it is; RCDATA: text, entities decoded)
SPACE = re.compile(r"[\t\n\f\r /]*")  # (between attributes: HTML5 skips a stray "/" too)
ATTRIBUTE = re.compile(
    r"""([^\t\n\f\r />][^\t\n\f\r /=>]*)(?:[\t\n\f\r ]*=[\t\n\f\r ]*"""
    r"""("[^"]*(?:"|\Z)|'[^']*(?:'|\Z)|[^\t\n\f\r >]*))?"""
)
TAG = re.compile(r"<(/?)([A-Za-z][^\t\n\f\r />]*)")
SCRIPT_MARKS = re.compile(r"<!--(?!-*>)|-->|<(/?)script(?=[\t\n\f\r />])", re.IGNORECASE)


def tag_end(document: str, at: int) -> tuple[int, dict]:
    """Past the `>` of a tag whose attributes start at `at`, and its attributes (the first of each name, entities
    decoded); (len(document), ...) where the document ends inside the tag (a browser drops that tag)."""
    attributes: dict[str, str] = {}
    while True:
        at = SPACE.match(document, at).end()
        if at >= len(document) or document[at] == ">":
            return min(at + 1, len(document)), attributes
        match = ATTRIBUTE.match(document, at)
        value = match.group(2) or ""
        value = value[1:-1] if len(value) > 1 and value[0] in "\"'" and value[-1] == value[0] else value
        attributes.setdefault(match.group(1).lower(), html.unescape(value))
        at = match.end()


def raw_end(document: str, at: int, tag: str) -> int:
    """Where the contents of a `tag` (of `RAW_TEXT` or `RCDATA`) starting at `at` end: at its end tag, as HTML5
    reads it (in a script, a `</script>` inside `<!--<script>` ... `-->` does not end it), else the document's end."""
    if tag == "plaintext":
        return len(document)
    if tag != "script":
        match = re.compile(rf"</{tag}(?=[\t\n\f\r />])", re.IGNORECASE).search(document, at)
        return match.start() if match else len(document)
    state = "data"  # HTML5's script data, "escaped" (in <!--) or "double" (in <!--<script>)
    for match in SCRIPT_MARKS.finditer(document, at):
        mark = match.group()
        if mark.startswith("<!--"):
            state = "escaped" if state == "data" else state
        elif mark == "-->":
            state = "data"
        elif match.group(1):  # </script
            if state != "double":
                return match.start()
            state = "escaped"
        elif state == "escaped":  # <script
            state = "double"
    return len(document)


class TextNodes:
    """Where each text node, tag, comment, ... of `document` starts (`starts`: (offset, whether it is text to
    translate)), read in one pass as an HTML5 parser tokenizes (so in time linear in the document, and never an
    error: anything that is not a tag is text). `open`: the elements open at this point, each as (tag, its contents
    kept as they are, inside an element of `NOT_PROSE`); `names` counts them by tag, so an end tag of no open
    element costs nothing."""

    def __init__(self, document: str):
        self.starts: list[tuple[int, bool]] = []
        self.open: list[tuple[str, bool, bool]] = []
        self.names: Counter = Counter()
        at = 0
        while at < len(document):
            at = self.token(document, at)

    def token(self, document: str, at: int) -> int:
        """Reads the token at `at`; where the next one starts."""
        if document[at] != "<":
            end = document.find("<", at)
            self.starts.append((at, not (self.open and self.open[-1][1])))
            return len(document) if end < 0 else end
        tag = TAG.match(document, at)
        self.starts.append((at, False))
        if tag is None:
            if document.startswith("<!--", at):  # a comment (`<!-->` and `<!--->` are empty ones)
                end = document.find("-->", at + 2)
                return len(document) if end < 0 else end + 3
            if document.startswith("<![CDATA[", at):  # (a bogus comment in HTML, a section in SVG: kept whole)
                end = document.find("]]>", at)
                return len(document) if end < 0 else end + 3
            if document.startswith(("<!", "<?", "</"), at):  # a declaration, a bogus comment: up to the next ">"
                end = document.find(">", at)
                return len(document) if end < 0 else end + 1
            self.starts[-1] = (at, not (self.open and self.open[-1][1]))  # a "<" that opens nothing is text
            return at + 1
        end, attributes = tag_end(document, tag.end())
        name = tag.group(2).lower()
        if tag.group(1):
            self.end_tag(name)
            return end
        self.start_tag(name, attributes)
        if name in RAW_TEXT or name in RCDATA:
            self.starts.append((end, name in RCDATA and not self.open[-1][1]))
            return raw_end(document, end, name)
        return end

    def start_tag(self, tag, values):
        if tag in VOID:
            return
        kept, code = self.open[-1][1:] if self.open else (False, False)
        choice = values.get("translate", "inherit").strip().lower()  # HTML's: "yes" (or ""), "no", else inherited
        if choice in ("yes", "", "no"):
            kept = choice == "no"
        code = code or tag in NOT_PROSE or tag in RAW_TEXT  # (never translated, whatever an element inside says)
        self.open.append((tag, code or kept or "notranslate" in values.get("class", "").split(), code))
        self.names[tag] += 1

    def end_tag(self, tag):
        if self.names[tag]:  # closes the innermost open element of that name, and every element open inside it
            while True:
                name = self.open.pop()[0]
                self.names[name] -= 1
                if name == tag:
                    break


def html_segments(document: str) -> list[tuple[str, str, str]]:
    starts = list({start: text for start, text in TextNodes(document).starts}.items())  # (in order; at one
    # offset, the last: an empty node is no node)
    if not starts or starts[0][0] != 0:
        starts.insert(0, (0, False))
    starts = [(start, text) for i, (start, text) in enumerate(starts) if i == 0 or starts[i - 1][1] != text]
    # (adjacent text events are one node)
    spans = [(text, document[start:end]) for (start, text), (end, _) in zip(starts, starts[1:] + [(len(document), 0)])]
    out = []
    for text, piece in spans:
        content = " ".join(html.unescape(piece).split())
        if not text or not has_words(content):
            out.append(("keep", piece, piece))
            continue
        lead, trail = piece[: len(piece) - len(piece.lstrip())], piece[len(piece.rstrip()) :]
        raw = piece[len(lead) : len(piece) - len(trail)]
        out += [("keep", lead, lead), ("node", content, raw), ("keep", trail, trail)]
    return out


def segments(text: str, text_format: str) -> list[tuple[str, str, str]]:
    """The pieces of `text` (LibreTranslate's `format`: "text" or "html"), in order, as (kind, text, raw): a "keep"
    stays as it is; a "sentence" or a "node" (an HTML text node: entities decoded in `text`, its translation escaped)
    is translated, its `raw` kept where the translation is the text itself."""
    if text_format not in TEXT_FORMATS:
        raise ValueError(f"{text_format} format is not supported")
    return text_segments(text) if text_format == "text" else html_segments(text)


def sentences(pieces: list[tuple[str, str, str]]) -> list[str]:
    return [text for kind, text, _ in pieces if kind != "keep"]


def rebuild(pieces: list[tuple[str, str, str]], translations) -> str:
    """`pieces` with each sentence replaced by the next of `translations` (a text node's escaped)."""
    translations, out = iter(translations), []
    for kind, text, raw in pieces:
        if kind == "keep":
            out.append(raw)
            continue
        translated = next(translations).replace("\n", " ")
        if translated == text:
            out.append(raw)
        else:
            out.append(html.escape(translated, quote=False) if kind == "node" else translated)
    return "".join(out)
