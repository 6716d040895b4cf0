"""The demo page (`vanilla-transformer demo`): its functions against the models' own outputs, friendly messages for bad
input and unloadable models, the page itself in headless Chromium, and the Space pushed to the loopback Hub and run."""

import os
import shutil
import subprocess
import sys

import pytest
import torch
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging as transformers_logging

pytest.importorskip("gradio", reason="the demo page needs the [demo] extra (gradio)")

from hub_server import hub_env  # noqa: E402

from conftest import ROOT, chrome, free_port, wait_for  # noqa: E402
from vanilla_transformer import cli  # noqa: E402
from vanilla_transformer.commands import push
from vanilla_transformer.data import DEMO_SOURCE_LANG, make_demo_ner, make_demo_translation  # noqa: E402
from vanilla_transformer.deploy import demo_page as demo_app  # noqa: E402
from vanilla_transformer.model.modeling_vanilla_transformer import (  # noqa: E402
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerForTokenClassification,
)
from vanilla_transformer.ner.mentions import mention_spans  # noqa: E402
from vanilla_transformer.tokenization import load_tokenizer  # noqa: E402

SOURCES = [row[DEMO_SOURCE_LANG] for row in make_demo_translation(8, seed=123, max_length=10)["translation"]]
NER_SENTENCES = [" ".join(words) for words in make_demo_ner(6, seed=321)["tokens"]]


def generate_text(model_dir, text, num_beams=1, max_new_tokens=16):
    tokenizer = load_tokenizer(model_dir)
    model = VanillaTransformerForConditionalGeneration.from_pretrained(model_dir).eval()
    enc = tokenizer([text], return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        out = model.generate(**enc, num_beams=num_beams, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(out[0], skip_special_tokens=True, clean_up_tokenization_spaces=False)


def tagger_entities(model_dir, text):
    """(type, surface text) of the entities the tagger's own argmax gives, word by word (the first sub-token)."""
    tokenizer = load_tokenizer(model_dir)
    model = VanillaTransformerForTokenClassification.from_pretrained(model_dir).eval()
    words = text.split()
    enc = tokenizer(words, is_split_into_words=True, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        predicted = model(**enc).logits.argmax(-1)[0].tolist()
    tags, seen = [], set()
    for position, word in enumerate(enc.word_ids()):
        if word is not None and word not in seen:
            seen.add(word)
            tags.append(model.config.id2label[predicted[position]])
    return [(kind, " ".join(words[start:end])) for start, end, kind in mention_spans(tags)]


# ------------------------------------------------------------------------------------------------ the functions
def test_translate_equals_generate_with_attention(small_demo_model):
    demo = demo_app.TranslationDemo(str(small_demo_model))
    assert demo.model.generation_config.max_length is not None
    with CaptureLogger(transformers_logging.get_logger("transformers.generation.utils")) as log:
        outputs = {
            (text, beams): demo.translate(text, num_beams=beams, max_new_tokens=16)
            for text in SOURCES[:4]
            for beams in (1, 3)
        }
    assert "seem to have been set" not in log.out  # the slider replaces the saved max_length, quietly
    for (text, beams), out in outputs.items():
        assert out["translation"] == generate_text(small_demo_model, text, beams), (text, beams)
    config = demo.model.config
    layers, heads, rows, cols = out["attention"].shape
    assert (layers, heads) == (config.decoder_layers, config.decoder_attention_heads)
    assert (rows, cols) == (len(out["target_tokens"]), len(out["source_tokens"]))
    assert torch.allclose(torch.from_numpy(out["attention"]).sum(-1), torch.ones(layers, heads, rows), atol=1e-4)
    # the chooser: one layer and head vs the averages
    average = demo_app.attention_figure(out).axes[0].images[0].get_array()
    one = demo_app.attention_figure(out, "2", "1").axes[0].images[0].get_array()
    assert torch.allclose(torch.as_tensor(one), torch.from_numpy(out["attention"][1, 0]))
    assert torch.allclose(torch.as_tensor(average), torch.from_numpy(out["attention"].mean((0, 1))), atol=1e-6)
    assert demo.layers == ["average", "1", "2"] and len(demo.heads) == config.decoder_attention_heads + 1


def test_translate_ctranslate2_engine(small_demo_model):
    pytest.importorskip("ctranslate2")
    demo = demo_app.TranslationDemo(str(small_demo_model))
    assert "CTranslate2" in demo.engines
    agree = sum(
        demo.translate(t, 1, 16, "CTranslate2")["translation"] == generate_text(small_demo_model, t) for t in SOURCES
    )
    assert agree >= len(SOURCES) - 1  # int8 weights may flip a rare token
    out = demo.translate(SOURCES[0], 2, 16, "CTranslate2")
    assert out["attention"].shape[2] == len(out["target_tokens"])


def test_bad_input_gives_messages(small_demo_model, small_ner_model):
    demo = demo_app.TranslationDemo(str(small_demo_model))
    assert demo.translate("   ")["message"] == "Type some text to translate."
    too_long = "1" * (demo.limit + 5)
    message = demo.translate(too_long)["message"]
    assert "tokens long" in message and f"at most {demo.limit}" in message
    ner = demo_app.NerDemo(str(small_ner_model))
    assert ner.tag("")["message"] == "Type some text to tag."
    assert "at most" in ner.tag("Anna " * (ner.limit + 1))["message"]


def test_tag_equals_tagger(small_ner_model):
    demo = demo_app.NerDemo(str(small_ner_model))
    for text in NER_SENTENCES:
        out = demo.tag(text)
        spans = [(e["entity"], text[e["start"] : e["end"]]) for e in out["entities"]]
        assert spans == tagger_entities(small_ner_model, text), text
        assert [row[0] for row in out["tokens"]] == demo.tokenizer.tokenize(text)
        assert {row[1] for row in out["tokens"]} <= set(demo.pipeline.model.config.label2id)


def test_models_that_do_not_load(tmp_path, small_demo_model, small_ner_model):
    assert demo_app.load_demo(demo_app.TranslationDemo, str(tmp_path / "missing"))[1].startswith("Loading the model")
    message = demo_app.load_demo(demo_app.NerDemo, str(small_demo_model))[1]
    assert "not a tagger" in message and "Traceback" not in message
    message = demo_app.load_demo(demo_app.TranslationDemo, str(small_ner_model))[1]
    assert "not a translation model" in message
    broken = tmp_path / "broken"
    shutil.copytree(small_demo_model, broken, ignore=shutil.ignore_patterns("checkpoint-*"))
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    assert "model.safetensors" in demo_app.load_demo(demo_app.TranslationDemo, str(broken))[1]
    app = demo_app.build_app(str(tmp_path / "missing"), None)  # the page still builds and shows the message
    assert any("Loading the model" in str(getattr(block, "value", "")) for block in app.blocks.values())
    with pytest.raises(ValueError, match="Give a translation model"):
        demo_app.build_app(None, None)


def test_demo_command(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo"]) == 2  # no model given and no outputs/demo here
    assert "Give a translation model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    assert "--ner_model" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # the translation model given twice, differently
        cli.main(["demo", "a", "--translation_model", "b"])
    launched = []

    class FakeApp:
        def launch(self, **kwargs):
            launched.append(kwargs)

    monkeypatch.setattr(
        demo_app, "build_app", lambda *models, **options: launched.append((models, options)) or FakeApp()
    )
    (tmp_path / "outputs" / "demo").mkdir(parents=True)
    assert cli.main(["demo", "--port", "7999"]) == 0  # found, not given: a model that fails shows in the page
    assert launched == [
        (("outputs/demo", None, None, "auto"), {"strict": False}),
        {"server_name": "127.0.0.1", "server_port": 7999},
    ]
    launched.clear()
    assert cli.main(["demo", "outputs/demo"]) == 0  # given: it must load before the page is served
    assert launched[0] == (("outputs/demo", None, None, "auto"), {"strict": True})


# ------------------------------------------------------------------------------------------------ in a browser
@pytest.fixture
def page(small_demo_model, small_ner_model):
    app = demo_app.build_app(str(small_demo_model), str(small_ner_model))
    port = free_port()
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    browser = chrome()
    try:
        browser.get(f"http://127.0.0.1:{port}")
        yield browser
    finally:
        browser.quit()
        app.close()


def test_page_in_a_browser(page, small_demo_model, small_ner_model, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def text_of(css):
        found = page.find_elements(By.CSS_SELECTOR, css)
        if not found:
            return ""
        return found[0].get_attribute("value" if found[0].tag_name == "textarea" else "textContent")

    def press(button_id, textarea_css, text):
        box = wait_for(lambda: page.find_elements(By.CSS_SELECTOR, textarea_css), what=textarea_css)[0]
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.BACKSPACE)  # typed, so the page sees the change (clear() fires no input event)
        box.send_keys(text)
        page.find_element(By.ID, button_id).click()

    # Translate: the page shows what generate gives, and the attention heatmap
    for text in SOURCES[:3]:
        press("translate-button", "#source textarea", text)
        expected = generate_text(small_demo_model, text)
        wait_for(
            lambda expected=expected: text_of("#translation textarea") == expected, what=f"the translation of {text!r}"
        )
    wait_for(
        lambda: page.find_elements(By.CSS_SELECTOR, "#attention img, #attention canvas, #attention svg image"),
        what="the attention heatmap",
    )
    page.save_screenshot(str(tmp_path / "translate.png"))
    press("translate-button", "#source textarea", "   ")
    wait_for(lambda: "Type some text to translate." in text_of("#translate-status"), what="the empty-input message")

    # Tag entities: the highlighted spans are the tagger's predictions
    next(b for b in page.find_elements(By.CSS_SELECTOR, "button[role=tab]") if b.text == "Tag entities").click()
    for text in NER_SENTENCES[:3]:
        press("ner-button", "#ner-text textarea", text)
        expected = tagger_entities(small_ner_model, text)

        def shown():
            spans = page.find_elements(By.CSS_SELECTOR, "#entities .token.highlighted")
            return [
                (s.find_element(By.CSS_SELECTOR, ".label").text, s.find_element(By.CSS_SELECTOR, ".text").text)
                for s in spans
            ]

        wait_for(lambda expected=expected: shown() == expected, what=f"the entities of {text!r} (expected {expected})")
    assert "B-" in page.find_element(By.ID, "tokens").text
    page.save_screenshot(str(tmp_path / "ner.png"))
    press("ner-button", "#ner-text textarea", "")
    wait_for(lambda: "Type some text to tag." in text_of("#ner-status"), what="the empty-input message")
    if os.environ.get("VT_SCREENSHOTS"):  # the docs' pictures: VT_SCREENSHOTS=docs/images
        os.makedirs(os.environ["VT_SCREENSHOTS"], exist_ok=True)
        for name in ("translate", "ner"):
            shutil.copy(tmp_path / f"{name}.png", os.path.join(os.environ["VT_SCREENSHOTS"], f"demo_{name}.png"))


# ------------------------------------------------------------------------------------------------ the Space
def test_space_pushed_and_run(hub, tmp_path, small_demo_model):
    from gradio_client import Client
    from huggingface_hub import SpaceCard

    endpoint, state = hub
    env = hub_env(endpoint, tmp_path / "hf_home", GRADIO_ANALYTICS_ENABLED="False")
    script = os.path.join(ROOT, "scripts", "push_to_hub.py")
    for args in (
        [str(small_demo_model), "tester/demo-model"],
        ["--space", "tester/demo-space", "--translation_model", "tester/demo-model"],
    ):
        proc = subprocess.run(
            [sys.executable, script, *args], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    repo = state.repos["spaces/tester/demo-space"]
    assert repo.settings["sdk"] == "gradio" and "tester/demo-space" not in state.repos  # a Space, not a model repo
    space = tmp_path / "space"
    for path, content in repo.commits[-1][2].items():  # what the Hub holds, as the Space checks it out
        (space / path).parent.mkdir(parents=True, exist_ok=True)
        (space / path).write_bytes(content)
    card = SpaceCard.load(space / "README.md")
    assert card.data.sdk == "gradio" and card.data.app_file == "app.py" and card.data.models == ["tester/demo-model"]
    requirements = (space / "requirements.txt").read_text().split()
    assert {r.split("==")[0] for r in requirements} >= {"torch", "transformers", "gradio", "ctranslate2"}
    assert all("==" in r for r in requirements), requirements
    assert (space / "vanilla_transformer" / "deploy" / "demo_page.py").is_file()

    # The Space's app.py, run as the Space runs it (its own copy of the package), serves translations
    port = free_port()
    child_env = dict(env, GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port))
    child = subprocess.Popen(
        [sys.executable, "app.py"],
        cwd=space,
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        client = wait_for(
            lambda: try_client(Client, f"http://127.0.0.1:{port}/"), timeout=120, what="the Space's app to start"
        )
        status, translation, *_ = client.predict(
            SOURCES[0], 1, 16, "PyTorch", "average", "average", api_name="/translate"
        )
        assert status == "" and translation == generate_text(small_demo_model, SOURCES[0])
    finally:
        child.kill()
        output = child.communicate()[0]
    assert "Traceback" not in output, output[-3000:]


def try_client(client_class, url):
    try:
        return client_class(url, verbose=False)
    except Exception:  # noqa: BLE001 - not up yet
        return None


def test_space_needs_a_model(capsys):
    assert push.main(["--space", "tester/x"]) == 2
    assert "--translation_model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        push.main(["--space", "tester/x", "some/dir", "repo/id"])
