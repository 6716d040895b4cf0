"""The languages a server translates: their codes (LibreTranslate's, BCP 47's shape: `pt-BR`, `zh-Hant`), its pairs
(one model each), the routes between them (direct, or through a pivot language two models share), their names, and
language identification for `source: "auto"` and `/detect`."""

import re

from ..engines import ServedTranslator
from .errors import ServeError

# A language code as LibreTranslate writes them, BCP 47's shape: a language of 2-3 letters, then a script of 4 letters
# and a region of 2 letters or 3 digits, each optional, joined by - (de, pt-BR, zh-Hant, es-419)
LANGUAGE_CODE = re.compile(r"([A-Za-z]{2,3})(?:-([A-Za-z]{4}))?(?:-([A-Za-z]{2}|[0-9]{3}))?")

# LibreTranslate's names of its languages (its /languages), by the codes it answers
LANGUAGE_NAMES = {
    "ar": "Arabic",
    "az": "Azerbaijani",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "ca": "Catalan",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "eo": "Esperanto",
    "es": "Spanish",
    "et": "Estonian",
    "eu": "Basque",
    "fa": "Persian",
    "fi": "Finnish",
    "fr": "French",
    "ga": "Irish",
    "gl": "Galician",
    "he": "Hebrew",
    "hi": "Hindi",
    "hu": "Hungarian",
    "id": "Indonesian",
    "it": "Italian",
    "ja": "Japanese",
    "ko": "Korean",
    "ky": "Kyrgyz",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "ms": "Malay",
    "nb": "Norwegian",
    "nl": "Dutch",
    "pl": "Polish",
    "pt": "Portuguese",
    "pt-BR": "Portuguese (Brazil)",
    "ro": "Romanian",
    "ru": "Russian",
    "sk": "Slovak",
    "sl": "Slovenian",
    "sq": "Albanian",
    "sr": "Serbian",
    "sv": "Swedish",
    "th": "Thai",
    "tl": "Tagalog",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "vi": "Vietnamese",
    "zh": "Chinese",
    "zh-Hans": "Chinese",
    "zh-Hant": "Chinese (traditional)",
}

# LibreTranslate's other names of one language (its models' codes pb and zt; zh, its models' code for zh-Hans): a
# request naming one of them is answered by the one served
LIBRETRANSLATE_ALIASES = (("pb", "pt-BR"), ("zh", "zh-Hans"), ("zt", "zh-Hant"))


def canonical_code(text) -> str | None:
    """`text` as BCP 47 and LibreTranslate write a code - the language in lower case, the Script capitalised, the
    REGION in capitals (PT-br: pt-BR) - where it has a code's shape (`LANGUAGE_CODE`), else None."""
    match = LANGUAGE_CODE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        return None
    language, script, region = match.groups()
    return "-".join(part for part in (language.lower(), script and script.title(), region and region.upper()) if part)


def served_code(code: str) -> str:
    """A model's code as the server serves it: written as BCP 47 writes it (`canonical_code`), else as it is (a model
    card's code of another shape, `src`'s demo kin)."""
    return canonical_code(code) or code


def split_pair(text: str) -> tuple[str, str] | None:
    """SOURCE-TARGET as two codes (`canonical_code`), or None where no `-` splits it into two. A `-` also joins a code's
    subtags, so the pair splits at the `-` that leaves two codes. Only a 2-letter subtag after the source's language
    or script can fit either side (the source's region, or the target's language: `de-pt-BR`, `pt-BR-de`); where both
    readings are codes, the one whose codes are both written as BCP 47 writes them wins - a region in capitals, a
    language in lower case, as LibreTranslate writes pt-BR: de-pt-BR is de -> pt-BR, pt-BR-de is pt-BR -> de - and
    where neither is (pt-br-de), a ValueError names both readings."""
    parts = text.split("-")
    readings = [("-".join(parts[:i]), "-".join(parts[i:])) for i in range(1, len(parts))]
    readings = [pair for pair in readings if canonical_code(pair[0]) and canonical_code(pair[1])]
    written = [pair for pair in readings if all(canonical_code(code) == code for code in pair)]
    if len(readings) > 1 and len(written) != 1:
        said = " or ".join(f"{canonical_code(source)} -> {canonical_code(target)}" for source, target in readings)
        raise ValueError(
            f"{text!r} reads as {said}: write the region in capitals and the language in lower case, as BCP 47 "
            "does (pt-BR-de, de-pt-BR)"
        )
    if not readings:
        return None
    source, target = written[0] if len(readings) > 1 else readings[0]
    return canonical_code(source), canonical_code(target)


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


class Pairs:
    """The translation engines by (source, target), at most one each, their codes as served (`served_code`).
    `route(source, target)`: the engines a text goes through - one for a served pair, two through a pivot language
    (source -> pivot -> target) where no model translates the pair directly, None where no route exists. `served`:
    the served code a request names."""

    def __init__(self, engines: list[ServedTranslator]):
        self.direct: dict[tuple[str, str], ServedTranslator] = {}
        for engine in engines:
            pair = (served_code(engine.source), served_code(engine.target))
            if pair in self.direct:
                raise ValueError(
                    f"two models translate {pair[0]} -> {pair[1]}: {self.direct[pair].model_dir} and "
                    f"{engine.model_dir} (serve one model per language pair)."
                )
            self.direct[pair] = engine
        self.codes = self.request_codes()

    def request_codes(self) -> dict[str, str]:
        """A request's code in lower case -> the served code it names: each served code, and LibreTranslate's other
        name of a served language (`LIBRETRANSLATE_ALIASES`) where that name is not served itself."""
        codes = {code.lower(): code for code in self.languages()}
        for names in LIBRETRANSLATE_ALIASES:
            served = [codes[name.lower()] for name in names if name.lower() in codes]
            for name in names if served else ():
                codes.setdefault(name.lower(), served[0])
        return codes

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

    def served(self, code) -> str:
        """The served code that a request's `code` (any JSON value a client sent) names, matched as LibreTranslate
        matches codes: in any case (PT-br is pt-BR), or by LibreTranslate's other name for it (zh for zh-Hans:
        `LIBRETRANSLATE_ALIASES`); LibreTranslate's 400 where no model knows it."""
        found = self.codes.get(code.lower()) if isinstance(code, str) and code.isascii() else None
        if found is None:
            raise ServeError(400, f"{code} is not supported")
        return found

    def requested(self, source, target) -> tuple[str, str]:
        """A LibreTranslate request's `source` and `target` as the served codes they name (`served`), source first;
        a `source` of "auto" in any case (LibreTranslate reads codes in lower case) is "auto"."""
        auto = isinstance(source, str) and source.lower() == "auto"
        return "auto" if auto else self.served(source), self.served(target)

    def checked_route(self, source, target) -> list[ServedTranslator]:
        """`route` between the served codes a request names (`served`), or LibreTranslate's 400 for a language no
        model knows or a pair no route joins."""
        source, target = self.served(source), self.served(target)
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


# Everyday characters that Chinese's two scripts write differently, the simplified and the traditional form in the same
# place: which of them a text holds more of tells its script (lingua knows Chinese, not its scripts)
CHINESE_SCRIPTS = (
    "这个们说国会来时为对学发经过还没话问门见车长东书开关语马与业头爱电让从动现样给观钱认识实应该吗听买卖写读点边进报间题员岁",
    "這個們說國會來時為對學發經過還沒話問門見車長東書開關語馬與業頭愛電讓從動現樣給觀錢認識實應該嗎聽買賣寫讀點邊進報間題員歲",
)


def chinese_script(text: str) -> str:
    """A Chinese text's script: Hant where it holds more characters of the traditional script than of the simplified
    one (`CHINESE_SCRIPTS`), else Hans."""
    simplified, traditional = (sum(map(text.count, script)) for script in CHINESE_SCRIPTS)
    return "Hant" if traditional > simplified else "Hans"


def script_of(code: str) -> str | None:
    """The script a code names, or that its region implies for Chinese (zh-TW, zh-HK, zh-MO: Hant; zh, zh-CN: Hans, as
    LibreTranslate's zh is zh-Hans)."""
    match = LANGUAGE_CODE.fullmatch(code)
    if match is None:
        return None
    language, script, region = match.groups()
    if script or language.lower() != "zh":
        return script and script.title()
    return "Hant" if (region or "").upper() in ("TW", "HK", "MO") else "Hans"


def answering(codes: list[str], text: str) -> str:
    """Of the served codes of one language (lingua tells pt from es, not pt from pt-BR nor Chinese's scripts), the one
    a text detected in it answers: for Chinese, one of the text's script (`chinese_script`); else the language alone
    (pt before pt-BR); else the first served."""
    if len(codes) > 1 and codes[0].split("-")[0].lower() == "zh":
        codes = [code for code in codes if script_of(code) == chinese_script(text)] or codes
    return next((code for code in codes if "-" not in code), codes[0])


class Detector:
    """Language identification by lingua (its models ship in its wheel: nothing is downloaded), restricted to the
    served languages, as LibreTranslate restricts its own. `detect(text)` -> the served source languages, most
    likely first, each `{"language", "confidence"}` with a confidence of 0-100; a text most likely in a language
    served only as a target is a 400. lingua knows a code by its language (pt-BR: Portuguese); where several served
    codes share one, the text's `answering` code comes first, the others after it with the same confidence. Codes
    lingua does not know (the demo's `src`) are not detectable: a server with one source language answers it, with
    confidence 100."""

    def __init__(self, sources: list[str], languages: list[str]):
        self.sources, self.languages, self.detector = sources, languages, None

    def known(self) -> dict:
        """lingua's languages by the served codes it knows, each by its language subtag (pt-BR: Portuguese)."""
        from lingua import IsoCode639_1, Language

        known = {}
        for code in self.languages:
            match = LANGUAGE_CODE.fullmatch(code)
            try:
                known[code] = Language.from_iso_code_639_1(IsoCode639_1.from_str(match.group(1).lower()))
            except (AttributeError, ValueError):  # (no code's shape, or a language lingua does not know)
                continue
        return known

    def start(self) -> None:
        """Build the detector (its models load here, not on the first request); a server with one source language
        needs none."""
        if len(self.sources) > 1 and self.detector is None:
            from lingua import LanguageDetectorBuilder

            self.lingua = self.known()
            found = set(self.lingua.values())
            if len(found) > 1:
                self.detector = LanguageDetectorBuilder.from_languages(*found).with_preloaded_language_models().build()

    def first(self, text: str) -> set[str]:
        """The served source code each language lingua knows answers (`answering`)."""
        codes: dict = {}
        for code, language in self.lingua.items():
            if code in self.sources:
                codes.setdefault(language, []).append(code)
        return {answering(each, text) for each in codes.values()}

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
        found = {c.language: c.value for c in self.detector.compute_language_confidence_values(text)}
        values = {code: found.get(language, 0.0) for code, language in self.lingua.items()}
        first = self.first(text)
        ranked = sorted(self.languages, key=lambda code: (-values.get(code, 0.0), code not in first))
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
