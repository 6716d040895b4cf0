"""Language codes as LibreTranslate writes them (`pt-BR`, `zh-Hans`, `zh-Hant`: BCP 47's shape): in
`serve MODEL_DIR:SOURCE-TARGET` (the pair split at the `-` that leaves two codes, the case deciding between two
readings), `--source_lang` / `--target_lang` and their variables, a model card's languages; in requests (any case,
LibreTranslate's other names), `/languages` and `/frontend/settings` (LibreTranslate's names), detection (lingua's
`pt` answered by the served `pt-BR`, Chinese by its script) and pivoting through a code with a subtag."""

import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("fastapi")
from conftest import FakeEngine, client_for, wait_ready  # noqa: E402
from vanilla_transformer.commands import serve  # noqa: E402
from vanilla_transformer.deploy.server.errors import ServeError  # noqa: E402
from vanilla_transformer.deploy.server.languages import (  # noqa: E402
    Pairs,
    canonical_code,
    chinese_script,
    split_pair,
)

# codes as BCP 47 writes them: a language of 2-3 letters, then a Script of 4 letters, a REGION of 2 letters or 3 digits
LETTERS = "abcdefghijklmnopqrstuvwxyz"
CODES = st.builds(
    lambda language, script, region: "-".join(part for part in (language, script, region) if part),
    st.text(LETTERS, min_size=2, max_size=3),
    st.none() | st.text(LETTERS, min_size=4, max_size=4).map(str.title),
    st.none() | st.text(LETTERS, min_size=2, max_size=2).map(str.upper) | st.from_regex(r"[0-9]{3}", fullmatch=True),
)


def parse(argv=(), env=None):
    """serve.parse_args of a model and `argv`, `env` its variables: (args or None, the error's message)."""
    try:
        return serve.parse_args(["model", *argv], env or {}), ""
    except ValueError as error:
        return None, str(error)


def recased(draw_bools, text: str) -> str:
    return "".join(c.upper() if flip else c.lower() for c, flip in zip(text, draw_bools))


# ------------------------------------------------------------------------------------------------ the pair parser
@settings(max_examples=300, deadline=None)
@given(source=CODES, target=CODES)
def test_any_pair_of_codes_written_as_bcp_47_writes_them_round_trips(source, target):
    assert canonical_code(source) == source and canonical_code(target) == target
    assert split_pair(f"{source}-{target}") == (source, target)
    assert serve.model_and_pair(f"/no/such/model:{source}-{target}") == ("/no/such/model", (source, target))


@settings(max_examples=300, deadline=None)
@given(source=CODES, target=CODES, flips=st.lists(st.booleans(), min_size=40, max_size=40))
def test_a_pair_in_any_case_is_read_as_one_of_its_splits_or_refused_naming_its_readings(source, target, flips):
    """Whatever the case: the codes of some split at a `-`, each as BCP 47 writes it; the pair as written where only
    one split leaves two codes; where two do, the one written as BCP 47 writes codes, else a ValueError naming both."""
    text, parts = recased(flips, f"{source}-{target}"), f"{source}-{target}".split("-")
    readings = [("-".join(parts[:i]), "-".join(parts[i:])) for i in range(1, len(parts))]
    readings = [(canonical_code(s), canonical_code(t)) for s, t in readings if canonical_code(s) and canonical_code(t)]
    assert (source, target) in readings
    try:
        found = split_pair(text)
    except ValueError as error:
        assert len(readings) == 2 and " or " in str(error) and "capitals" in str(error)
        return
    assert found in readings and "-".join(found).lower() == text.lower()
    if len(readings) == 1:
        assert found == (source, target)


@settings(max_examples=50, deadline=None)
@given(source=CODES, target=CODES)
def test_a_path_that_exists_as_written_is_a_path(source, target):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"model:{source}-{target}")
        os.mkdir(path)
        assert serve.model_and_pair(path) == (path, None)
        os.rmdir(path)
        assert serve.model_and_pair(path) == (os.path.join(folder, "model"), (source, target))


@pytest.mark.parametrize(
    "pair, codes",
    [
        ("de-en", ("de", "en")),
        ("de-pt-BR", ("de", "pt-BR")),
        ("pt-BR-de", ("pt-BR", "de")),
        ("en-zh-Hant", ("en", "zh-Hant")),
        ("zh-hant-EN", ("zh-Hant", "en")),  # (one split only: in any case)
        ("zh-Hans-zh-Hant", ("zh-Hans", "zh-Hant")),
        ("es-419-pt-BR", ("es-419", "pt-BR")),
        ("src-tgt", ("src", "tgt")),
        ("de_DE-en", None),
        ("auto-en", None),
        ("de", None),
        ("", None),
    ],
)
def test_pairs_split_at_the_dash_that_leaves_two_codes(pair, codes):
    assert split_pair(pair) == codes


def test_a_pair_that_reads_two_ways_is_an_error_naming_both():
    for text, readings in (("pt-br-de", "pt -> br-DE or pt-BR -> de"), ("de-PT-BR", "de -> pt-BR or de-PT -> br")):
        with pytest.raises(ValueError, match=f"^MODEL_DIR:SOURCE-TARGET 'm:{text}': '{text}' reads as {readings}: "):
            serve.model_and_pair(f"m:{text}")


def test_a_model_dir_with_something_after_its_colon_that_is_no_pair_is_an_error(tmp_path):
    (tmp_path / "model").mkdir()
    with pytest.raises(ValueError, match="no such path, and 'de_DE-en' is not two language codes"):
        serve.model_and_pair(f"{tmp_path}/model:de_DE-en")
    assert serve.model_and_pair("/no/such:de_DE-en") == ("/no/such:de_DE-en", None)  # (recognise: not found)
    assert serve.model_and_pair(":de-en") == (":de-en", None)


# ------------------------------------------------------------------------------------------------ the flags, the card
def test_the_language_flags_and_variables_take_codes_with_subtags_in_any_case():
    args = parse(["--source_lang", "PT-br"], {"LT_TARGET_LANG": "zh-hant"})[0]
    assert (args.source_lang, args.target_lang) == ("pt-BR", "zh-Hant")
    for bad in ("de_DE", "pt-BR-x", "zh-Hant-Hans", "deutsch", "d", "pt-BRA"):
        args, message = parse(["--source_lang", bad])
        assert args is None and message.startswith(f"--source_lang '{bad}': expected a language code"), message
    message = parse(["--source_lang", "pt-br"], {"LT_TARGET_LANG": "PT-BR"})[1]
    assert message.startswith("--source_lang and LT_TARGET_LANG name one language (pt-BR)"), message


def test_a_pair_and_a_model_card_s_languages_are_served_as_bcp_47_writes_them(monkeypatch):
    from vanilla_transformer.model_dirs import ModelDir

    cards = {"card": ("PT-br", "zh-hant"), "odd": ("eng_Latn", "deu_Latn")}
    monkeypatch.setattr(
        serve,
        "recognise",
        lambda path, engine="auto", task=None: ModelDir(path, "translation", "pytorch", languages=cards.get(path)),
    )
    translators, _, _ = serve.served_models(serve.parse_args(["card", "m:pt-BR-de", "odd"], {}))
    assert [(engine.source, engine.target) for engine in translators] == [
        ("pt-BR", "zh-Hant"),
        ("pt-BR", "de"),
        ("eng_Latn", "deu_Latn"),  # (a card's code of another shape: served as written)
    ]
    with pytest.raises(ValueError, match="two models translate pt-BR -> zh-Hant"):
        serve.served_models(serve.parse_args(["card", "m:pt-BR-zh-hant"], {}))


# ------------------------------------------------------------------------------------------------ the server
def lt(client, **fields):
    return client.post("/translate", json=fields)


def test_requests_name_served_codes_in_any_case_and_answers_write_them_as_served():
    """de -> pt-BR, pt-BR -> fr and en -> zh-Hant served: /languages names them as LibreTranslate does; a request's
    code matches in any case (and by LibreTranslate's other names, pb and zt), the answer writing the served code;
    de -> fr goes through pt-BR; pt alone is not pt-BR."""
    engines = [
        FakeEngine(source="de", target="pt-br", reverse=False),  # (an engine's code is served as BCP 47 writes it)
        FakeEngine(source="pt-BR", target="fr", reverse=False),
        FakeEngine(source="en", target="zh-Hant", reverse=False),
    ]
    with client_for(*engines) as client:
        wait_ready(client)
        assert client.get("/languages").json() == [
            {"code": "de", "name": "German", "targets": ["pt-BR", "fr"]},
            {"code": "pt-BR", "name": "Portuguese (Brazil)", "targets": ["fr"]},
            {"code": "fr", "name": "French", "targets": []},
            {"code": "en", "name": "English", "targets": ["zh-Hant"]},
            {"code": "zh-Hant", "name": "Chinese (traditional)", "targets": []},
        ]
        assert client.get("/frontend/settings").json()["language"] == {
            "source": {"code": "de", "name": "German"},
            "target": {"code": "pt-BR", "name": "Portuguese (Brazil)"},
        }
        assert lt(client, q="ab", source="DE", target="PT-br").json() == {"translatedText": "pt-br(ab)"}
        assert lt(client, q="ab", source="de", target="pb").json() == {"translatedText": "pt-br(ab)"}
        assert lt(client, q="ab", source="de", target="fr").json() == {"translatedText": "fr(pt-br(ab))"}  # a pivot
        assert lt(client, q="ab", source="En", target="zt").json() == {"translatedText": "zh-Hant(ab)"}
        assert lt(client, q="ab", source="pt-br", target="PT-BR").json() == {"translatedText": "ab"}  # one language
        refused = lt(client, q="ab", source="fr", target="pt-br")
        assert refused.json() == {
            "error": "Portuguese (Brazil) (pt-BR) is not available as a target language from French (fr)"
        }
        assert lt(client, q="ab", source="de", target="pt").json() == {"error": "pt is not supported"}
        assert lt(client, q="ab", source="de", target="zh-Hans").json() == {"error": "zh-Hans is not supported"}
        v1 = client.post("/v1/translate", json={"sentences": ["ab"], "source": "DE", "target": "Fr"})
        assert v1.json() == {"translations": ["fr(pt-br(ab))"]}
        upload = client.post(
            "/translate_file", data={"source": "de", "target": "PT-BR"}, files={"file": ("a.txt", b"ab", "text/plain")}
        )
        download = client.get(upload.json()["translatedFileUrl"].removeprefix("http://testserver"))
        assert download.content == b"pt-br(ab)"


def test_libretranslate_s_other_names_answer_the_one_served():
    """zh and zh-Hans are one language to LibreTranslate (its zh model answers as zh-Hans), as are pb and pt-BR, zt
    and zh-Hant: a request naming either is answered by the one served."""
    pairs = Pairs([FakeEngine(source="zh", target="en"), FakeEngine(source="en", target="zh-Hant")])
    assert [pairs.served(code) for code in ("ZH", "zh-hans", "zt", "ZH-HANT", "EN")] == [
        "zh",
        "zh",
        "zh-Hant",
        "zh-Hant",
        "en",
    ]
    pairs = Pairs([FakeEngine(source="zh-Hans", target="pb")])
    assert [pairs.served(code) for code in ("zh", "zh-Hans", "pb", "PT-BR")] == ["zh-Hans", "zh-Hans", "pb", "pb"]
    for code in ("pt", "zt", "zh-Hant", None, 3, ["zh"]):
        with pytest.raises(ServeError, match="is not supported"):
            pairs.served(code)
    with pytest.raises(ServeError, match="is not supported"):
        Pairs([FakeEngine(source="ko", target="en")]).served("\u212ao")  # (the Kelvin sign is no k)


def test_detection_answers_the_served_code_of_the_detected_language():
    """lingua knows pt and zh: a Portuguese text answers the served pt-BR; Chinese texts the zh code of their script
    where both are served, each listed with the same confidence."""
    pytest.importorskip("lingua")
    engines = [
        FakeEngine(source="pt-BR", target="en", reverse=False),
        FakeEngine(source="zh-Hant", target="en", reverse=False),
        FakeEngine(source="zh-Hans", target="en", reverse=False),
        FakeEngine(source="en", target="de", reverse=False),
    ]
    portuguese = "O menino está brincando com o cachorro no parque durante a tarde."
    simplified, traditional = "这是一个很好的问题，我们会认真考虑。", "這是一個很好的問題，我們會認真考慮。"
    with client_for(*engines) as client:
        wait_ready(client)
        found = client.post("/detect", json={"q": portuguese}).json()
        assert found[0]["language"] == "pt-BR" and found[0]["confidence"] > 50, found
        for text, first, second in ((simplified, "zh-Hans", "zh-Hant"), (traditional, "zh-Hant", "zh-Hans")):
            found = client.post("/detect", json={"q": text}).json()
            assert [row["language"] for row in found[:2]] == [first, second], found
            assert found[0]["confidence"] == found[1]["confidence"] > 50
        answer = lt(client, q=[portuguese, traditional], source="AUTO", target="EN").json()
        assert answer["translatedText"] == [f"en({portuguese})", f"en({traditional})"]
        assert [row["language"] for row in answer["detectedLanguage"]] == ["pt-BR", "zh-Hant"]
    with client_for(FakeEngine(source="en", target="pt-BR"), FakeEngine(source="de", target="en")) as client:
        wait_ready(client)  # Portuguese served only as a target: named as served
        refused = client.post("/detect", json={"q": portuguese})
        assert refused.status_code == 400 and "pt-BR is not supported as a source language" in refused.json()["error"]


def test_a_chinese_text_s_script_is_the_one_it_holds_more_characters_of():
    assert chinese_script("这是一个问题") == "Hans" and chinese_script("這是一個問題") == "Hant"
    assert chinese_script("no Chinese here") == "Hans"  # (LibreTranslate's zh is zh-Hans)
