"""A real Hub round trip over HTTP against the loopback Hub-API server: train -> push -> load in a fresh process
without our package (trust_remote_code) -> identical outputs; pipelines from the repo id; a second push makes a new
revision; bad directories are refused with a message naming what is missing."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import torch
from hub_server import hub_env
from huggingface_hub import ModelCard
from transformers import AutoModelForSeq2SeqLM, AutoModelForTokenClassification, AutoTokenizer

from conftest import BLOCK_PACKAGE, ner_args, push, translation_args, write_parallel
from vanilla_transformer.commands import push as push_command
from vanilla_transformer.commands import train_ner, train_translation

CHILD = BLOCK_PACKAGE + textwrap.dedent("""
    import json, sys, torch
    try:
        import vanilla_transformer
        raise SystemExit("vanilla_transformer must not be importable here")
    except ImportError:
        pass
    from transformers import AutoTokenizer, AutoModelForSeq2SeqLM, AutoModelForTokenClassification, pipeline
    repo, head, text, out, *revisions = sys.argv[1:]
    loaded = {}
    for given in revisions:  # "-": the latest
        revision = None if given == "-" else given
        tok = AutoTokenizer.from_pretrained(repo, trust_remote_code=True, revision=revision)
        cls = AutoModelForSeq2SeqLM if head == "seq2seq" else AutoModelForTokenClassification
        model = cls.from_pretrained(repo, trust_remote_code=True, revision=revision).eval()
        enc = tok([text], return_tensors="pt", return_token_type_ids=False)
        with torch.no_grad():
            if head == "seq2seq":
                logits = model(**enc, decoder_input_ids=enc["input_ids"]).logits
                pipe = pipeline(model=repo, trust_remote_code=True, revision=revision)
                result = pipe(text, max_new_tokens=6)
                assert set(result[0]) == {"translation_text"}, result
            else:
                logits = model(**enc).logits
                pipe = pipeline("token-classification", model=repo, trust_remote_code=True,
                                aggregation_strategy="simple", revision=revision)
                result = pipe(text)
                assert isinstance(result, list), result
        loaded[given] = {"logits": logits, "pipeline": json.dumps(result, default=float)}
    torch.save(loaded, out)
""")


def load_in_child(endpoint, tmp_path, repo_id, head, text, revisions=("-",)):
    """What a process without our package loads from the Hub: {revision: {"logits", "pipeline"}}, "-" the latest."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / f"child_{head}.pt"
    proc = subprocess.run(
        [sys.executable, str(script), repo_id, head, text, str(out), *revisions],
        env=hub_env(endpoint, tmp_path / "hf_home"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    for asked in ("Do you wish to run the custom code", "to instantiate a model of type"):  # no prompt, no warning
        assert asked not in proc.stdout + proc.stderr, proc.stderr[-4000:]
    return torch.load(out)


def local_logits(model_dir, head, text):
    tok = AutoTokenizer.from_pretrained(model_dir)
    enc = tok([text], return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        if head == "seq2seq":
            model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
            return model(**enc, decoder_input_ids=enc["input_ids"]).logits
        return AutoModelForTokenClassification.from_pretrained(model_dir).eval()(**enc).logits


def test_translation_round_trip_and_new_revision(hub, tmp_path):
    endpoint, state = hub
    data_dir = write_parallel(tmp_path)
    out = tmp_path / "mt"
    train_translation.main(translation_args(data_dir, out, "--do_train", "--do_eval"))
    card = ModelCard.load(out / "README.md")
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "translation"
    assert card.data.eval_results and card.data.eval_results[0].metric_type == "bleu"
    assert "trust_remote_code=True" in card.text

    repo_id = "tester/vt-de-en"
    proc = push(endpoint, tmp_path, out, repo_id)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first_sha = state.repos[repo_id].commits[-1][0]
    files = set(state.repos[repo_id].commits[-1][2])
    assert {
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "configuration_vanilla_transformer.py",
        "modeling_vanilla_transformer.py",
        "tokenizer.json",
        "README.md",
        "all_results.json",
    } <= files
    assert not any(f.endswith(".bin") or f.startswith("checkpoint-") for f in files)
    assert "auto_map" in json.loads(state.repos[repo_id].commits[-1][2]["config.json"])

    # a changed model pushed again is a new revision; both revisions load
    changed = AutoModelForSeq2SeqLM.from_pretrained(out)
    with torch.no_grad():
        changed.lm_head.weight.mul_(1.5)  # tied: the embeddings change too
    shutil.copytree(out, tmp_path / "mt2")
    changed.save_pretrained(tmp_path / "mt2")
    proc = push(endpoint, tmp_path, tmp_path / "mt2", repo_id)
    assert proc.returncode == 0, proc.stderr[-3000:]
    second_sha = state.repos[repo_id].commits[-1][0]
    assert second_sha != first_sha
    text = "Ein hund läuft im park."
    loaded = load_in_child(endpoint, tmp_path, repo_id, "seq2seq", text, revisions=(first_sha, "-"))
    torch.testing.assert_close(loaded[first_sha]["logits"], local_logits(out, "seq2seq", text), rtol=0, atol=0)
    torch.testing.assert_close(loaded["-"]["logits"], local_logits(tmp_path / "mt2", "seq2seq", text), rtol=0, atol=0)


def test_token_classification_round_trip(hub, tmp_path):
    endpoint, _ = hub
    out = tmp_path / "ner"
    train_ner.main(ner_args(tmp_path, out, "--do_train", "--do_eval"))
    card = ModelCard.load(out / "README.md")
    assert card.data.pipeline_tag == "token-classification"
    assert {r.metric_type for r in card.data.eval_results} >= {"f1", "precision", "recall"}
    repo_id = "tester/vt-ner"
    proc = push(endpoint, tmp_path, out, repo_id)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = "Anna lives in Berlin ."
    got = load_in_child(endpoint, tmp_path, repo_id, "token_classification", text)["-"]
    torch.testing.assert_close(got["logits"], local_logits(out, "token_classification", text), rtol=0, atol=0)


def test_push_refuses_incomplete_directories(hub, tmp_path, capsys):
    """Refused before anything is uploaded: the command (exit 2, one error line), then its main in this process."""
    endpoint, _ = hub
    (tmp_path / "empty").mkdir()
    proc = push(endpoint, tmp_path, tmp_path / "empty", "tester/bad")
    assert proc.returncode == 2 and "config.json is missing" in proc.stderr
    data_dir = write_parallel(tmp_path)
    out = tmp_path / "mt"
    train_translation.main(translation_args(data_dir, out, "--do_train", "--max_steps", "1"))
    shutil.copytree(out, tmp_path / "nocode")
    os.remove(tmp_path / "nocode" / "modeling_vanilla_transformer.py")
    capsys.readouterr()
    for directory, message in (("nocode", "modeling_vanilla_transformer.py"), ("missing", "is not a directory")):
        assert push_command.main([str(tmp_path / directory), "tester/bad"]) == 2
        assert message in capsys.readouterr().err
