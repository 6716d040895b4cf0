"""The languages a server translates: its pairs (one model each), the routes between them (direct, or through a pivot
language two models share), their names, and language identification for `source: "auto"` and `/detect`."""

import re

from ..engines import ServedTranslator
from .errors import ServeError

LANGUAGE_NAMES = {
    "ar": "Arabic",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "fi": "Finnish",
    "fr": "French",
    "hi": "Hindi",
    "hu": "Hungarian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "sv": "Swedish",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "zh": "Chinese",
}


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


class Pairs:
    """The translation engines by (source, target), at most one each. `route(source, target)`: the engines a text goes
    through - one for a served pair, two through a pivot language (source -> pivot -> target) where no model
    translates the pair directly, None where no route exists."""

    def __init__(self, engines: list[ServedTranslator]):
        self.direct: dict[tuple[str, str], ServedTranslator] = {}
        for engine in engines:
            pair = (engine.source, engine.target)
            if pair in self.direct:
                raise ValueError(
                    f"two models translate {pair[0]} -> {pair[1]}: {self.direct[pair].model_dir} and "
                    f"{engine.model_dir} (serve one model per language pair)."
                )
            self.direct[pair] = engine

    def languages(self) -> list[str]:
        """Every language served, as source or target, in the order the models name them."""
        return list(dict.fromkeys(code for pair in self.direct for code in pair))

    def sources(self) -> list[str]:
        return list(dict.fromkeys(source for source, _ in self.direct))

    def route(self, source: str, target: str) -> list[ServedTranslator] | None:
        if (source, target) in self.direct:
            return [self.direct[source, target]]
        for (first, pivot), engine in self.direct.items():
            if first == source and pivot != target and (pivot, target) in self.direct:
                return [engine, self.direct[pivot, target]]
        return None

    def targets(self, source: str) -> list[str]:
        """The languages `source` translates into, directly or through a pivot."""
        return [target for target in self.languages() if target != source and self.route(source, target)]

    def check_served(self, *codes) -> None:
        """LibreTranslate's 400 for the first of `codes` (any JSON value a client sent) that no model knows."""
        for code in codes:
            if not isinstance(code, str) or code not in self.languages():
                raise ServeError(400, f"{code} is not supported")

    def checked_route(self, source: str, target: str) -> list[ServedTranslator]:
        """`route`, or LibreTranslate's 400 for a language no model knows or a pair no route joins."""
        self.check_served(source, target)
        route = self.route(source, target)
        if route is None:
            raise ServeError(
                400,
                f"{language_name(target)} ({target}) is not available as a target language from "
                f"{language_name(source)} ({source})",
            )
        return route


# Language identification reads a text's first DETECTED_CHARS characters (past its leading whitespace), and of each
# word its first DETECTED_WORD characters: lingua is as sure after a few sentences, its time grows with the text and
# with the square of a word's length (one word of 400,000 letters: 50 s), and it holds the GIL all the while
DETECTED_CHARS, DETECTED_WORD = 4000, 100
LONG_WORD = re.compile(rf"\S{{{DETECTED_WORD + 1},}}")


def detection_sample(text: str) -> str:
    """What of `text` language identification reads (`DETECTED_CHARS`)."""
    return LONG_WORD.sub(lambda word: word.group(0)[:DETECTED_WORD], text.lstrip()[:DETECTED_CHARS])


class Detector:
    """Language identification by lingua (its models ship in its wheel: nothing is downloaded), restricted to the
    served languages, as LibreTranslate restricts its own. `detect(text)` -> the served source languages, most
    likely first, each `{"language", "confidence"}` with a confidence of 0-100; a text most likely in a language
    served only as a target is a 400. Codes lingua does not know (the demo's `src`) are not detectable: a server
    with one source language answers it, with confidence 100."""

    def __init__(self, sources: list[str], languages: list[str]):
        self.sources, self.languages, self.detector = sources, languages, None

    def known(self) -> dict:
        """lingua's languages by the served codes it knows."""
        from lingua import IsoCode639_1, Language

        known = {}
        for code in self.languages:
            try:
                known[code] = Language.from_iso_code_639_1(IsoCode639_1.from_str(code))
            except ValueError:
                continue
        return known

    def start(self) -> None:
        """Build the detector (its models load here, not on the first request); a server with one source language
        needs none."""
        if len(self.sources) > 1 and self.detector is None:
            from lingua import LanguageDetectorBuilder

            known = self.known()
            self.codes = {language: code for code, language in known.items()}
            if len(known) > 1:
                self.detector = (
                    LanguageDetectorBuilder.from_languages(*known.values()).with_preloaded_language_models().build()
                )

    def detect(self, text: str) -> list[dict]:
        """(CPU-bound, holding the GIL while lingua works: the routes run it off the event loop, on a text of at most
        `DETECTED_CHARS` characters.)"""
        if len(self.sources) == 1:
            return [{"language": self.sources[0], "confidence": 100.0}]
        self.start()
        if self.detector is None:
            raise ServeError(
                400,
                f"cannot detect the language: no language identification for {', '.join(self.sources)}; give source",
            )
        text = detection_sample(text)
        values = {self.codes[c.language]: c.value for c in self.detector.compute_language_confidence_values(text)}
        ranked = sorted(self.languages, key=lambda code: -values.get(code, 0.0))
        if values.get(ranked[0], 0.0) > 0 and ranked[0] not in self.sources:
            raise ServeError(
                400,
                f"{ranked[0]} is not supported as a source language: the text looks "
                f"{language_name(ranked[0])} (confidence {100 * values[ranked[0]]:.0f}); this server "
                f"translates from {', '.join(self.sources)}",
            )
        return [
            {"language": code, "confidence": round(100 * values.get(code, 0.0), 1)}
            for code in ranked
            if code in self.sources
        ]
