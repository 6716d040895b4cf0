"""What of a text or an HTML document the model translates, and how the translations go back in.

`segments(text, "text")`: each non-blank line is one sentence (its surrounding whitespace and the line ends kept).
`segments(document, "html")`: Python's HTML parser finds the text nodes; tags, attributes, comments, entities in
markup and the contents of `<script>` / `<style>` are kept byte for byte, and each text node with a letter or digit in
it is one sentence (entities decoded, whitespace runs as one space; the translation escaped back). The parser is
lenient as browsers are: markup that is not well-formed (an unclosed tag, a stray `<`) is read as HTML5 parsers read
it, never refused. `rebuild(segments, translations)` puts one translation per sentence back in order.
"""

import html
import re
from html.parser import HTMLParser

FORMATS = ("text", "html")
RAW_TEXT = ("script", "style")  # elements whose contents are code, not prose


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
    """Records where each parsing event starts and whether it is a text node to translate."""

    def __init__(self, document: str):
        super().__init__(convert_charrefs=True)
        self.line_starts = [0] + [match.end() for match in re.finditer("\n", document)]
        self.starts: list[tuple[int, bool]] = []
        self.raw_text = False

    def mark(self, text: bool) -> None:
        line, column = self.getpos()
        self.starts.append((self.line_starts[line - 1] + column, text))

    def handle_starttag(self, tag, attrs):
        self.mark(False)
        self.raw_text = tag in RAW_TEXT

    def handle_startendtag(self, tag, attrs):
        self.mark(False)

    def handle_endtag(self, tag):
        self.mark(False)
        self.raw_text = False

    def handle_data(self, data):
        self.mark(not self.raw_text)

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
