"""Training curves from a run's metrics.csv (every series read back from the figure at its
steps), BLEU by length, and their errors."""

import pytest

from qkv.cli.main import main
from qkv.viz.curves import bleu_by_length_figure, plot_training_curves, training_curves_figure

CSV = (
    "step,epoch,lr,train_loss,tokens_per_s,minutes,valid_loss,valid_bleu\n"
    "50,0,0.001,5.0,1000,0.5,,\n"
    "100,0,0.001,4.0,1000,1.0,,\n"
    "100,0,,,,,4.2,3.5\n"
    "150,0,0.001,3.5,1000,1.5,,\n"
)


def _series(axes) -> dict[str, tuple[list[float], list[float]]]:
    return {
        str(line.get_label()): (list(line.get_xdata()), list(line.get_ydata()))
        for line in axes.get_lines()
    }


def test_draws_every_series_at_its_steps(tmp_path):
    (tmp_path / "metrics.csv").write_text(CSV)
    figure = training_curves_figure(tmp_path / "metrics.csv")
    loss, bleu = figure.axes  # the losses, and BLEU on a twin axes
    assert _series(loss) == {
        "train loss": ([50.0, 100.0, 150.0], [5.0, 4.0, 3.5]),
        "valid loss": ([100.0], [4.2]),
    }
    assert _series(bleu) == {"valid BLEU": ([100.0], [3.5])}
    assert (loss.get_xlabel(), loss.get_ylabel(), bleu.get_ylabel()) == (
        "step",
        "loss (per token)",
        "BLEU",
    )
    legend = loss.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["train loss", "valid loss", "valid BLEU"]
    assert loss.get_title() == tmp_path.name  # the run's folder names the plot
    path = plot_training_curves(tmp_path / "metrics.csv", tmp_path / "c.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bleu_by_length_puts_each_model_at_its_buckets():
    figure = bleu_by_length_figure(
        {"rnn": [("0-10", 20.0), ("10-20", 15.0)], "attn": [("10-20", 18.0), ("20-30", 17.0)]},
        title="t",
    )
    (axes,) = figure.axes
    assert [t.get_text() for t in axes.get_xticklabels()] == ["0-10", "10-20", "20-30"]
    assert _series(axes) == {"rnn": ([0, 1], [20.0, 15.0]), "attn": ([1, 2], [18.0, 17.0])}


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
