"""`make setup` follows the torch a user asks for: installed where the venv has none, replaced when TORCH_INDEX or
TORCH_PIN is given anew, and a torch installed by hand (docs/gpu.md's CUDA build) kept by every other target. Run
with a stand-in Python that records each call instead of installing anything."""

import os
import shutil
import subprocess

import pytest

from conftest import ROOT

FAKE_PYTHON = """#!/bin/sh
# a stand-in interpreter: `-m venv DIR` makes DIR/bin/python (this script); `-c "import torch"` succeeds once a pip
# call installed torch; every other call is recorded
venv=$(dirname "$(dirname "$0")")
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
if [ "$1" = "-c" ]; then test -e "$venv/torch"; exit $?; fi
echo "$*" >> "$venv/calls"
case "$*" in *"pip install"*torch==*) touch "$venv/torch";; esac
"""


@pytest.fixture
def setup(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_PIN", "TORCH_INDEX", "MAKEFLAGS", "MFLAGS")}

    def run(*assignments) -> list[str]:
        """The pip calls `make setup` makes (none: up to date)."""
        calls = venv / "calls"
        if calls.exists():
            calls.unlink()
        subprocess.run(
            ["make", "-s", "-C", ROOT, "setup", f"VENV={venv}", f"PYTHON={python}", *assignments],
            check=True,
            env=env,
            capture_output=True,
            timeout=60,
        )
        return (
            [line for line in calls.read_text().splitlines() if "install -q --upgrade pip" not in line]
            if calls.exists()
            else []
        )

    return run, venv


def test_setup_installs_torch_once_and_replaces_it_only_when_asked(setup):
    run, venv = setup
    first = run()
    assert [c for c in first if "torch==2.13.0" in c] == ["-m pip install -q torch==2.13.0"], first
    assert any("-c constraints.txt -e ." in c for c in first) and not any("torch" in c for c in first[1:])
    assert run() == []  # up to date
    cpu = "TORCH_INDEX=https://download.pytorch.org/whl/cpu"
    replaced = run(cpu)
    assert replaced[0] == (
        "-m pip install -q --force-reinstall --no-deps --index-url https://download.pytorch.org/whl/cpu torch==2.13.0"
    ), replaced
    assert run(cpu) == [] and run() == []  # the same choice again, or none: nothing to do
    assert run("TORCH_PIN=torch==2.14.0", cpu)[0].endswith(
        "--index-url https://download.pytorch.org/whl/cpu torch==2.14.0"
    )


def test_a_torch_installed_by_hand_is_kept(setup, tmp_path):
    run, venv = setup
    (venv / "bin").mkdir(parents=True)
    shutil.copy(tmp_path / "python", venv / "bin" / "python")
    (venv / "torch").touch()  # docs/gpu.md: a CUDA build installed into .venv by hand, no set-up run yet
    calls = run()
    assert calls and not any("torch" in c for c in calls), calls  # the package and its extras only
    (tmp_path / "venv" / ".installed").unlink()  # pyproject.toml changed (git pull): the set-up runs again
    assert not any("torch" in c for c in run())
