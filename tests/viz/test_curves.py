"""Training curves from a run's metrics.csv, and their errors."""

import pytest

from qkv.cli.main import main
from qkv.viz.curves import plot_training_curves

CSV = (
    "step,epoch,lr,train_loss,tokens_per_s,minutes,valid_loss,valid_bleu\n"
    "50,0,0.001,5.0,1000,0.5,,\n"
    "100,0,0.001,4.0,1000,1.0,,\n"
    "100,0,,,,,4.2,3.5\n"
    "150,0,0.001,3.5,1000,1.5,,\n"
)


def test_writes_a_png_with_every_series(tmp_path):
    (tmp_path / "metrics.csv").write_text(CSV)
    path = plot_training_curves(tmp_path / "metrics.csv", tmp_path / "c.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metrics file"):
        plot_training_curves(tmp_path / "metrics.csv", tmp_path / "c.png")
    (tmp_path / "metrics.csv").write_text("step,lr\n1,0.1\n")
    with pytest.raises(ValueError, match="no train_loss or valid_loss"):
        plot_training_curves(tmp_path / "metrics.csv", tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()


def test_cli_writes_next_to_the_run_and_exits_2_on_a_missing_run(tmp_path, capsys):
    (tmp_path / "metrics.csv").write_text(CSV)
    assert main(["plot-curves", str(tmp_path)]) == 0
    assert (tmp_path / "curves.png").is_file()
    assert main(["plot-curves", str(tmp_path / "missing")]) == 2
    assert "no run directory" in capsys.readouterr().err
