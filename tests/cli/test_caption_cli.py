"""``qkv train`` / ``caption`` / ``evaluate`` / ``plot-attention`` for a Show-Attend-Tell
captioner, through the real command line, on strips of scikit-learn's real 8x8 digits: held-out
strips saved as PNG files caption the same when read back, the JSON lines carry the reference,
and bad input exits 2 without a traceback."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from qkv.cli.main import main
from tests.commands import qkv, qkv_process

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None, reason="scikit-learn is not installed"
)
TINY = Path(__file__).resolve().parents[2] / "configs" / "caption" / "tiny.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("caption") / "run"
    result = qkv(
        "train", str(TINY), "--set", f"out_dir={out}", "--set", "train.max_steps=200", "--quiet"
    )
    assert result.returncode == 0, result.stderr
    return out


def test_saved_test_strips_caption_as_the_strips_themselves(run, tmp_path):
    strips = tmp_path / "strips"
    result = qkv(
        "caption", "--model", str(run), "--test-strips", "4", "--save-strips", str(strips), "--json"
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 4 and all(set(row) == {"image", "caption", "reference"} for row in rows)
    files = [row["image"] for row in rows]
    assert files == [str(strips / f"strip-{i}.png") for i in range(4)]
    # The PNG files hold the strips: read back, they get the same captions.
    again = qkv("caption", "--model", str(run), *files)
    assert again.returncode == 0, again.stderr
    lines = again.stdout.splitlines()
    assert [line.split("\t") for line in lines] == [[row["caption"], row["image"]] for row in rows]
    # Plain output marks each caption against its reference.
    plain = qkv("caption", "--model", str(run), "--test-strips", "4")
    for line, row in zip(plain.stdout.splitlines(), rows, strict=True):
        caption, marked, _ = line.split("\t")
        assert caption == row["caption"]
        assert marked == ("= " if row["caption"] == row["reference"] else "x ") + row["reference"]


def test_evaluate_and_plot_attention(run, tmp_path):
    result = qkv("evaluate", "--model", str(run))
    assert result.returncode == 0, result.stderr
    assert "test: 200 strips" in result.stdout
    # Measured (deterministic under the seeds): exact match 0.95, alignment accuracy 1.0. Chance:
    # a caption of 1-2 digits is right at most 1 time in 10; attention on the right tile about
    # 3 times in 4 (one-tile strips are always right).
    scores = re.search(r"exact match (\S+) .*\nalignment accuracy (\S+)", result.stdout)
    assert scores is not None, result.stdout
    assert float(scores.group(1)) >= 0.85 and float(scores.group(2)) >= 0.97
    qkv("caption", "--model", str(run), "--test-strips", "1", "--save-strips", str(tmp_path))
    out = tmp_path / "words.png"
    result = qkv(
        "plot-attention", "--model", str(run), str(tmp_path / "strip-0.png"), "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 2000 and f"wrote {out}" in result.stdout


def test_bad_input_exits_2_and_names_it(run, tmp_path, capsys):
    from PIL import Image

    Image.new("L", (13, 8)).save(tmp_path / "odd.png")
    (tmp_path / "notes.png").write_text("not an image")
    model = str(run)
    cases = [
        (("caption", "--model", model), "give at least one IMAGE, or --test-strips N"),
        (("caption", "--model", model, "--test-strips", "-1"), "--test-strips must be >= 0"),
        (("caption", "--model", model, "--test-strips", "999"), "between 0 and 200 test strips"),
        (("caption", "--model", model, "--save-strips", str(tmp_path), "x.png"), "give N"),
        (("caption", "--model", model, str(tmp_path / "notes.png")), "not a readable image"),
        (("caption", "--model", model, str(tmp_path / "missing.png")), "missing.png: no such"),
        (("caption", "--model", str(tmp_path), "--test-strips", "1"), "no model directory"),
        (("evaluate", "--model", model, "--split", "train"), "--split valid or test"),
        (
            ("plot-attention", "--model", model, str(tmp_path / "odd.png"), "-o",
             str(tmp_path / "x.png"), "--heads"),
            "--pooling and --heads are not for captioners",
        ),
    ]  # fmt: skip
    # In process: the CLI's own entry point, without a new interpreter for each case.
    for argv, message in [*cases, (("caption", "--model", model, str(tmp_path / "odd.png")),
                                   f"{tmp_path / 'odd.png'} has shape (1, 8, 13)")]:  # fmt: skip
        assert main(list(argv)) == 2, argv
        stderr = capsys.readouterr().err
        assert message in stderr and "Traceback" not in stderr, (argv, stderr)
    assert not (tmp_path / "x.png").exists()
    result = qkv_process(
        "caption", "--model", model, "--test-strips", "-1"
    )  # the real command, once
    assert result.returncode == 2 and "--test-strips must be >= 0" in result.stderr
    assert "Traceback" not in result.stderr
