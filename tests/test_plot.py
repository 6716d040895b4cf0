"""scripts/plot.py writes real pictures: PNG files with content, for curves, attention maps and positions; it leaves no
figure open (pyplot would keep each alive in a long-lived caller)."""

import pytest

mpimg = pytest.importorskip("matplotlib.image", reason="plot needs the [plot] extra (matplotlib)")

from conftest import translation_args, write_parallel  # noqa: E402
from vanilla_transformer.commands import plot, train_translation  # noqa: E402


def assert_picture(path):
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(path)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100 and pixels.std() > 0.01  # not blank


def test_curves_attention_positions(tmp_path):
    data_dir = write_parallel(tmp_path)
    out = tmp_path / "mt"
    train_translation.main(
        translation_args(data_dir, out, "--do_train", "--do_eval", "--eval_strategy", "steps", "--eval_steps", "3")
    )
    assert plot.main(["curves", str(out), "--out", str(tmp_path / "png")]) == 0
    assert_picture(tmp_path / "png" / "curves.png")
    plot.main(["attention", str(out), "Ein hund läuft im park.", "--out", str(tmp_path / "png")])
    for name in ("encoder_self", "decoder_self", "cross"):
        assert_picture(tmp_path / "png" / f"attention_{name}.png")
    plot.main(["positions", "--out", str(tmp_path / "png")])
    assert_picture(tmp_path / "png" / "positions.png")
    assert plot.pyplot().get_fignums() == []  # every figure closed once written


def test_quality_vs_time(tmp_path):
    import json

    import pytest

    data_dir = write_parallel(tmp_path)
    runs = []
    for name, steps in (("short", "4"), ("long", "8")):
        runs.append(tmp_path / name)
        train_translation.main(
            translation_args(
                data_dir,
                runs[-1],
                "--do_train",
                "--do_eval",
                "--eval_strategy",
                "steps",
                "--eval_steps",
                "2",
                "--max_steps",
                steps,
            )
        )
    history = json.loads((runs[-1] / "trainer_state.json").read_text())["log_history"]
    minutes = [h["train_minutes"] for h in history if "eval_bleu" in h]
    assert len(minutes) == 4 and minutes == sorted(minutes) and minutes[0] >= 0  # a clock: it only moves forward
    assert plot.main(["quality-vs-time", *map(str, runs), "--out", str(tmp_path / "png")]) == 0
    assert_picture(tmp_path / "png" / "quality_vs_time.png")
    assert plot.pyplot().get_fignums() == []
    no_eval = tmp_path / "no_eval"
    train_translation.main(translation_args(data_dir, no_eval, "--do_train"))
    with pytest.raises(ValueError, match="--eval_strategy epoch"):
        plot.main(["quality-vs-time", str(no_eval)])
