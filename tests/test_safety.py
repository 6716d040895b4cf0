"""Nothing destroyed, nothing leaked: no secret in any file a run writes or uploads, uploads by allow-list, no finished
model or another run's checkpoints overwritten by surprise, no path a command writes taken as the current directory,
devices and pipes written in place, and files as editors write them (a byte-order mark) read as they mean."""

import json
import os
import subprocess
import sys
import threading
import urllib.request

import pytest
from hub_server import hub_env

from conftest import ROOT, free_port, translation_args, write_parallel
from vanilla_transformer.cli import main as cli
from vanilla_transformer.commands import train_translation
from vanilla_transformer.files import read_lines, write_text
from vanilla_transformer.upload import UPLOADED

TOKEN, ENV_TOKEN, API_KEY = "hf_probe_token_0123", "hf_probe_environment_4567", "probe-api-key-89ab"


def files_holding(directory, *secrets) -> list[str]:
    """Every file under `directory` whose bytes hold one of `secrets`."""
    found = []
    for folder, _, names in os.walk(directory):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                content = f.read()
            found += [os.path.join(folder, name) for secret in secrets if secret.encode() in content]
    return found


def run_status(capsys, argv):
    """(exit status, stderr) of `vanilla-transformer ARGV` in this process."""
    capsys.readouterr()
    try:
        status = cli(argv)
    except SystemExit as exit_:
        status = exit_.code
    return status, capsys.readouterr().err


def test_a_hub_token_is_written_nowhere_and_the_hub_receives_the_allow_list(hub, tmp_path):
    """A training run with `--hub_token` (and HF_TOKEN set) and `--push_to_hub`, checkpoints on: the token is in no file
    under the output directory (card, card_info.json, trainer state, training_args.bin, logs), the loopback Hub receives
    what loading the model needs and its card only - no predictions, no run records, no pickle, no checkpoint - and no
    uploaded file holds an absolute path of this computer."""
    endpoint, state = hub
    data_dir, out = write_parallel(tmp_path), tmp_path / "run"
    env = hub_env(endpoint, tmp_path / "hf_home", token=ENV_TOKEN)
    argv = translation_args(
        data_dir,
        out,
        "--save_strategy",
        "steps",
        "--save_steps",
        "3",
        "--push_to_hub",
        "true",
        "--hub_model_id",
        "tester/probe",
        "--hub_token",
        TOKEN,
        "--report_to",
        "tensorboard",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer.run_translation", *argv],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "checkpoint-6" / "training_args.bin").is_file() and list((out / "runs").iterdir())
    assert files_holding(out, TOKEN, ENV_TOKEN) == []
    assert TOKEN not in proc.stdout + proc.stderr and ENV_TOKEN not in proc.stdout + proc.stderr
    assert "--hub_token '<HUB_TOKEN>'" in (out / "README.md").read_text(encoding="utf-8")
    uploaded = state.repos["tester/probe"].commits[-1][2]
    assert len(state.repos["tester/probe"].commits) == 1  # one push, the command's (none from the Trainer)
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "README.md",
        "modeling_vanilla_transformer.py",
    } <= set(uploaded)
    assert set(uploaded) <= set(UPLOADED), sorted(set(uploaded) - set(UPLOADED))
    for name, content in uploaded.items():
        assert str(tmp_path).encode() not in content and ROOT.encode() not in content, name  # (no absolute path)


@pytest.mark.parametrize(
    "spelling", [["--hub_tok", TOKEN], [f"--hub_tok={TOKEN}"], ["--hub-tok", TOKEN], ["--hub_t", TOKEN]]
)
def test_a_shortened_secret_flag_is_refused_without_printing_its_value(spelling, tmp_path, capsys):
    """argparse would take `--hub_tok X` as --hub_token, which the recorded command line would not hide: every
    training command refuses a flag not spelled in full, naming the flag and not the value."""
    for command in ("train-translation", "train-ner", "pretrain-encoder"):
        status, err = run_status(
            capsys, [command, "--output_dir", str(tmp_path / "run"), "--max_steps", "4", *spelling]
        )
        assert status == 2 and TOKEN not in err and spelling[0].split("=")[0] in err, err
        assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "spelling", [["--hub_token", TOKEN], [f"--hub_token={TOKEN}"], ["--hub-token", TOKEN], [f"--hub-token={TOKEN}"]]
)
def test_every_spelling_of_a_secret_flag_is_hidden_in_the_recorded_command(spelling, tmp_path):
    """The command line a run records hides the value of the option whose parsed destination is a secret, whatever
    the spelling, and by value too (a spelling the flag pattern would miss)."""
    from vanilla_transformer.model_card import invoked_command, shareable_words

    argv = ["--output_dir", str(tmp_path / "run"), "--max_steps", "4", *spelling]
    training_args = train_translation.parse(argv)[2]
    assert training_args.hub_token == TOKEN
    command = invoked_command(argv, {"HUB_TOKEN": training_args.hub_token})
    assert TOKEN not in command and "<HUB_TOKEN>" in command
    assert shareable_words(["--hub_tok", TOKEN, f"--x={TOKEN}"], {"HUB_TOKEN": TOKEN}) == [
        "--hub_tok",
        "<HUB_TOKEN>",
        "--x=<HUB_TOKEN>",
    ]


def test_a_served_api_key_is_written_nowhere(small_demo_model, tmp_path):
    """`serve --api_key KEY`, asked with the key and with a wrong one: the key is in no file under the directory it
    ran in and not in what it printed."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vanilla_transformer.cli",
            "serve",
            str(small_demo_model),
            "--port",
            str(port),
            "--engine",
            "pytorch",
            "--device",
            "cpu",
            "--api_key",
            API_KEY,
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "VT_API_KEY": ""},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                assert proc.poll() is None
                threading.Event().wait(0.1)
        for key in (API_KEY, "wrong"):
            body = json.dumps({"q": "ab12", "source": "src", "target": "tgt", "api_key": key}).encode()
            request = urllib.request.Request(
                f"{url}/translate", data=body, headers={"content-type": "application/json"}
            )
            try:
                urllib.request.urlopen(request, timeout=60)
            except urllib.error.HTTPError as error:
                assert key == "wrong" and error.code == 403, (error.code, error.read())
    finally:
        proc.terminate()
        printed = proc.communicate(timeout=30)[0]
    assert files_holding(tmp_path, API_KEY) == [] and API_KEY not in printed


def test_a_rerun_into_a_finished_directory_is_refused_and_overwrite_replaces_one_run(tmp_path, capsys):
    """Training into a directory with a finished model or checkpoints refuses with one error line naming the way out;
    `--resume_from_checkpoint true` continues there; `--overwrite_output_dir true` replaces it, the old checkpoints
    gone first (the directory holds one run's); an empty --output_dir is refused."""
    data_dir, out = write_parallel(tmp_path), tmp_path / "run"
    argv = translation_args(
        data_dir,
        out,
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--save_total_limit",
        "5",
        "--do_train",
        "--do_eval",
        "false",
        "--do_predict",
        "false",
    )
    train_translation.main(argv)
    assert sorted(os.listdir(out / "checkpoint-6")) and (out / "config.json").is_file()
    before = (out / "model.safetensors").read_bytes()
    status, err = run_status(capsys, ["train-translation", *argv, "--learning_rate", "5e-4"])
    assert status == 2 and err.count("\n") == 1 and str(out) in err
    assert "--overwrite_output_dir true" in err and "--resume_from_checkpoint true" in err
    assert (out / "model.safetensors").read_bytes() == before
    train_translation.main(argv + ["--resume_from_checkpoint", "true"])  # (continues: nothing refused)
    train_translation.main([a if a != "6" else "4" for a in argv] + ["--overwrite_output_dir", "true"])
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    status, err = run_status(capsys, ["train-translation", *translation_args(data_dir, ""), "--do_train"])
    assert status == 2 and "--output_dir is empty" in err


def test_average_checkpoints_of_one_run_and_as_many_as_asked(tmp_path, capsys):
    """`average-checkpoints --last N` refuses fewer than N checkpoints and checkpoints of two runs, naming them; the
    averaged model keeps the run's card (so `serve` of it knows its languages)."""
    data_dir, out = write_parallel(tmp_path), tmp_path / "run"
    argv = translation_args(
        data_dir,
        out,
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--save_total_limit",
        "5",
        "--do_train",
        "--do_eval",
        "false",
        "--do_predict",
        "false",
    )
    train_translation.main(argv)
    status, err = run_status(
        capsys, ["average-checkpoints", str(out), "--last", "5", "--output_dir", str(tmp_path / "a")]
    )
    assert status == 2 and "holds 3 checkpoint(s)" in err and "--last 3" in err
    assert (
        run_status(capsys, ["average-checkpoints", str(out), "--last", "3", "--output_dir", str(tmp_path / "a")])[0]
        == 0
    )
    assert (tmp_path / "a" / "README.md").read_text(encoding="utf-8") == (out / "README.md").read_text(encoding="utf-8")
    other = tmp_path / "other"
    train_translation.main(
        translation_args(
            data_dir,
            other,
            "--save_strategy",
            "steps",
            "--save_steps",
            "2",
            "--max_steps",
            "8",
            "--seed",
            "2",
            "--do_train",
            "--do_eval",
            "false",
            "--do_predict",
            "false",
        )
    )
    os.rename(other / "checkpoint-8", out / "checkpoint-8")  # a checkpoint of another run beside this run's
    status, err = run_status(
        capsys, ["average-checkpoints", str(out), "--last", "2", "--output_dir", str(tmp_path / "b")]
    )
    assert status == 2 and "checkpoint-6 belong to another run" in err


@pytest.mark.parametrize("command", ["export-ctranslate2", "export-onnx"])
def test_an_export_to_an_empty_path_or_onto_other_files_deletes_nothing(
    command, small_demo_model, small_ner_model, tmp_path, monkeypatch, capsys
):
    """`export-* MODEL ""` (an unset shell variable) is refused and the current directory keeps its files; `--force`
    onto a directory that is not an earlier export of the same command is refused too."""
    pytest.importorskip("ctranslate2" if command == "export-ctranslate2" else "onnx")
    model = small_demo_model if command == "export-ctranslate2" else small_ner_model
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.txt").write_text("my notes\n", encoding="utf-8")
    for output in ("", " "):
        status, err = run_status(capsys, [command, str(model), output, "--force"])
        assert status == 2 and "empty" in err, err
    assert os.listdir(tmp_path) == ["mine.txt"]
    status, err = run_status(capsys, [command, str(model), str(tmp_path), "--force"])
    assert status == 2 and "is not an earlier" in err and (tmp_path / "mine.txt").is_file()


def test_devices_pipes_and_symlinks_are_written_in_place(tmp_path):
    """A device (/dev/null) or a named pipe is written into, never replaced by a regular file; a symlink stays a link
    and its target gets the text."""
    write_text(os.devnull, "nothing\n")
    assert not os.path.isfile(os.devnull) and os.path.exists(os.devnull)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(pipe, encoding="utf-8").read()))
    reader.start()
    write_text(pipe, "through the pipe\n")
    reader.join(timeout=30)
    assert received == ["through the pipe\n"] and not pipe.is_file()
    target, link = tmp_path / "target.txt", tmp_path / "link.txt"
    target.write_text("old\n", encoding="utf-8")
    link.symlink_to(target)
    write_text(link, "new\n")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new\n"


def test_a_byte_order_mark_is_no_part_of_the_text(tmp_path, capsys):
    """A file opening with a UTF-8 byte-order mark (Notepad's) reads as without it: the lines, the score of identical
    texts (100, not a lower BLEU), the training pairs."""
    text = "Ein Hund läuft.\nZwei Katzen schlafen.\n"
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_text(text, encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert read_lines(str(marked)) == read_lines(str(plain)) == text.splitlines()
    status = cli(["score", str(marked), str(plain), "--output", str(tmp_path / "score.json")])
    assert status in (0, None)
    assert json.loads((tmp_path / "score.json").read_text())["sacrebleu"] == pytest.approx(100.0)
    from vanilla_transformer.data import load_parallel_text, stream_parallel_text

    (tmp_path / "p.de").write_bytes(b"\xef\xbb\xbfHallo Welt.\n")
    (tmp_path / "p.en").write_text("Hello world.\n", encoding="utf-8")
    for pairs in (
        load_parallel_text(str(tmp_path / "p"), "de", "en", cache_dir=str(tmp_path / "cache")),
        stream_parallel_text(str(tmp_path / "p"), "de", "en"),
    ):
        assert [row["translation"] for row in pairs] == [{"de": "Hallo Welt.", "en": "Hello world."}]


@pytest.mark.parametrize(
    "argv",
    [
        ["translate", "MODEL", "--output", ""],
        ["tag", "MODEL", "--output", " "],
        ["score", "a.txt", "b.txt", "--output", ""],
        ["average-checkpoints", "RUN", "--output_dir", ""],
        ["split-documents", "train.txt", ""],
        ["plot", "positions", "--out", ""],
        ["export-ctranslate2", "MODEL", ""],
        ["export-onnx", "MODEL", ""],
    ],
)
def test_every_path_a_command_writes_is_refused_when_empty(argv, capsys):
    """An empty output path (an unset shell variable) is refused where the command line is read, before anything
    loads or is written: one error line naming the flag."""
    status, err = run_status(capsys, argv)
    assert status == 2 and "empty: give the file or directory to write" in err, err
