"""scripts/plot.py writes real pictures: PNG files with content, for curves, attention maps and positions."""


import matplotlib.image as mpimg

from conftest import translation_args, write_parallel

from vanilla_transformer import plot, run_translation


def assert_picture(path):
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    pixels = mpimg.imread(path)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100 and pixels.std() > 0.01  # not blank


def test_curves_attention_positions(tmp_path):
    data_dir = write_parallel(tmp_path)
    out = tmp_path / "mt"
    run_translation.main(translation_args(data_dir, out, "--do_train", "--do_eval", "--eval_strategy", "steps",
                                          "--eval_steps", "3"))
    assert plot.main(["curves", str(out), "--out", str(tmp_path / "png")]) == 0
    assert_picture(tmp_path / "png" / "curves.png")
    plot.main(["attention", str(out), "Ein hund läuft im park.", "--out", str(tmp_path / "png")])
    for name in ("encoder_self", "decoder_self", "cross"):
        assert_picture(tmp_path / "png" / f"attention_{name}.png")
    plot.main(["positions", "--out", str(tmp_path / "png")])
    assert_picture(tmp_path / "png" / "positions.png")
