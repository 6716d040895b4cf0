"""What of a text or an HTML document the model translates, and how the translations go back in.

`segments(text, "text")`: each non-blank line is one sentence (its surrounding whitespace and the line ends kept).
`segments(document, "html")`: Python's HTML parser finds the text nodes; tags, attributes (`alt` and `title`
included, as LibreTranslate leaves them), comments, CDATA sections, processing instructions and entities in markup are
kept byte for byte, and so is every text that is not prose (`NOT_PROSE`: code, preformatted text, scripts, styles,
templates, ...) or that its author marked as not to be translated (`translate="no"`, or the class `notranslate`;
`translate="yes"` inside one turns translation back on). Each other text node with a letter or digit in it is one
sentence (entities decoded, whitespace runs as one space; the translation escaped back). The parser is lenient as
browsers are: markup that is not well-formed (an unclosed tag, a stray `<`) is read as HTML5 parsers read it, never
refused. `rebuild(segments, translations)` puts one translation per sentence back in order.
"""

import html
import re
from collections import Counter
from html.parser import HTMLParser

FORMATS = ("text", "html")
# Elements whose contents are not prose, never translated (LibreTranslate's translatehtml skips address, applet,
# audio, canvas, code, embed, script, style, time and video; code-like and preformatted text too, whose spacing a
# translation would lose)
NOT_PROSE = frozenset({"address", "applet", "audio", "canvas", "code", "embed", "kbd", "math", "object", "pre",
                       "samp", "script", "style", "template", "time", "var", "video", "xmp", "plaintext", "listing"})
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                  "track", "wbr", "keygen"})  # elements without an end tag: they hold nothing


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
        out += [("keep", body[:start], body[:start]), ("sentence", content, content),
                ("keep", line[start + len(content):], line[start + len(content):])]
    return out


class TextNodes(HTMLParser):
    """Records where each parsing event starts and whether it is a text node to translate. `open`: the elements open
    at this point, each as (tag, its contents kept as they are, inside an element of `NOT_PROSE`); `names` counts
    them by tag, so an end tag of no open element costs nothing (work stays linear in the document)."""

    def __init__(self, document: str):
        super().__init__(convert_charrefs=True)
        self.line_starts = [0] + [match.end() for match in re.finditer("\n", document)]
        self.starts: list[tuple[int, bool]] = []
        self.open: list[tuple[str, bool, bool]] = []
        self.names: Counter = Counter()

    def mark(self, text: bool) -> None:
        line, column = self.getpos()
        self.starts.append((self.line_starts[line - 1] + column, text))

    def handle_starttag(self, tag, attrs):
        self.mark(False)
        if tag in VOID:
            return
        kept, code = self.open[-1][1:] if self.open else (False, False)
        values = {name: (value or "") for name, value in attrs}
        choice = values.get("translate", "inherit").strip().lower()  # HTML's: "yes" (or ""), "no", else inherited
        if choice in ("yes", "", "no"):
            kept = choice == "no"
        code = code or tag in NOT_PROSE  # (never translated, whatever an element inside says)
        self.open.append((tag, code or kept or "notranslate" in values.get("class", "").split(), code))
        self.names[tag] += 1

    def handle_startendtag(self, tag, attrs):
        self.mark(False)

    def handle_endtag(self, tag):
        self.mark(False)
        if self.names[tag]:  # closes the innermost open element of that name, and every element open inside it
            while True:
                name = self.open.pop()[0]
                self.names[name] -= 1
                if name == tag:
                    break

    def handle_data(self, data):
        self.mark(not (self.open and self.open[-1][1]))

    def handle_comment(self, data):
        self.mark(False)

    def handle_decl(self, decl):
        self.mark(False)

    def handle_pi(self, data):
        self.mark(False)

    def unknown_decl(self, data):
        self.mark(False)


def html_segments(document: str) -> list[tuple[str, str, str]]:
    parser = TextNodes(document)
    parser.feed(document)
    parser.close()
    starts = sorted(set(parser.starts))
    if not starts or starts[0][0] != 0:
        starts.insert(0, (0, False))
    spans: list[tuple[bool, str]] = []
    for (start, text), (end, _) in zip(starts, starts[1:] + [(len(document), False)]):
        piece = document[start:end]
        if spans and spans[-1][0] == text:  # adjacent text events are one node
            spans[-1] = (text, spans[-1][1] + piece)
        else:
            spans.append((text, piece))
    out = []
    for text, piece in spans:
        content = " ".join(html.unescape(piece).split())
        if not text or not has_words(content):
            out.append(("keep", piece, piece))
            continue
        lead, trail = piece[:len(piece) - len(piece.lstrip())], piece[len(piece.rstrip()):]
        raw = piece[len(lead):len(piece) - len(trail)]
        out += [("keep", lead, lead), ("node", content, raw), ("keep", trail, trail)]
    return out


def segments(text: str, text_format: str) -> list[tuple[str, str, str]]:
    """The pieces of `text` (LibreTranslate's `format`: "text" or "html"), in order, as (kind, text, raw): a "keep"
    stays as it is; a "sentence" or a "node" (an HTML text node: entities decoded in `text`, its translation escaped)
    is translated, its `raw` kept where the translation is the text itself."""
    if text_format not in FORMATS:
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
