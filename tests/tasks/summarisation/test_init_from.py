"""A run started from another run's weights (``train.init_from``), See et al.'s final coverage
phase: the weights and the vocabulary come from the old run, parameters the new configuration
adds start at zero (so the phase starts from the old model's outputs exactly), anything else
that differs is refused by name, and the phase is a new run (its steps start at zero)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from qkv.cli.main import main
from qkv.models.seq2seq_rnn import Seq2SeqRNN, Seq2SeqRNNConfig
from qkv.tasks.init_from import init_from_run
from qkv.tasks.run_dir import WEIGHTS_FILE, RunDirError
from qkv.training.checkpoint import save_weights

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs/tiny/copy-pointer-rnn.yaml"
TINY = ["data.options.n_train=200", "data.options.n_valid=10", "data.options.n_test=10",
        "data.valid_examples=4", "model.hidden_dim=16", "model.embed_dim=8",
        "train.eval_every=3", "train.warmup_steps=1", "train.tensorboard=false"]  # fmt: skip


def model(vocab=20, **options) -> Seq2SeqRNN:
    config = Seq2SeqRNNConfig(vocab, vocab, embed_dim=8, hidden_dim=8, dropout=0.0, copy=True,
                              copy_attention="decoder", **options)  # fmt: skip
    return Seq2SeqRNN(config).eval()


def saved(tmp_path: Path, net: Seq2SeqRNN) -> Path:
    save_weights(net, tmp_path / WEIGHTS_FILE)
    return tmp_path


def test_the_added_coverage_weight_starts_at_zero_and_the_outputs_are_the_old_models(tmp_path):
    torch.manual_seed(0)
    old = model()
    new = model(coverage=True)
    assert init_from_run(new, saved(tmp_path, old)) == ("decoder.coverage_weight",)
    src, lengths = torch.tensor([[5, 6, 7, 2]]), torch.tensor([4])
    tgt_in = torch.tensor([[1, 5, 6]])
    a, b = old(src, lengths, tgt_in), new(src, lengths, tgt_in)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.copy.gate, b.copy.gate)
    assert torch.equal(a.copy.weights, b.copy.weights)


def test_another_vocabulary_size_is_refused_naming_the_tensors(tmp_path):
    run = saved(tmp_path, model(vocab=20))
    with pytest.raises(RunDirError, match=r"generator\.weight \(20, 16\) in the run, \(24, 16\)"):
        init_from_run(model(vocab=24, coverage=True), run)


def test_a_missing_parameter_that_is_not_zero_initialised_is_refused_by_name(tmp_path):
    # The old run copies with the decoder's attention; the new one with its own: the head's
    # attention is missing from the run (and the run's keys match nothing the new one expects
    # beyond the gate), so the message names it.
    run = saved(tmp_path, model())
    own = Seq2SeqRNN(Seq2SeqRNNConfig(20, 20, embed_dim=8, hidden_dim=8, copy=True))
    with pytest.raises(RunDirError, match=r"missing \['copy_head\.score\.key_proj\.bias'"):
        init_from_run(own, run)
    # Without copy the run's copy head is unexpected.
    plain = Seq2SeqRNN(Seq2SeqRNNConfig(20, 20, embed_dim=8, hidden_dim=8))
    with pytest.raises(RunDirError, match=r"unexpected \['copy_head\.gate\.bias'"):
        init_from_run(plain, run)


def test_a_directory_without_weights_is_refused(tmp_path):
    with pytest.raises(RunDirError, match=r"model\.safetensors is missing"):
        init_from_run(model(), tmp_path)


def _train(capsys, out: Path, *sets: str) -> None:
    argv = ["train", str(CONFIG), "--quiet", "--threads", "1"]
    for item in (*TINY, f"out_dir={out}", *sets):
        argv += ["--set", item]
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 0, err


def test_a_final_coverage_phase_through_the_cli(tmp_path, capsys):
    first, phase = tmp_path / "pointer", tmp_path / "phase"
    _train(capsys, first, "model.copy_attention=decoder", "train.max_steps=6")
    _train(capsys, phase, "model.copy_attention=decoder", "model.coverage=true",
           "train.max_steps=3", f"train.init_from={first}")  # fmt: skip
    config = json.loads((phase / "config.json").read_text())
    assert config["train"]["init_from"] == str(first)
    assert config["model"]["coverage"] and config["model"]["copy_attention"] == "decoder"
    assert (phase / "vocab.json").read_bytes() == (first / "vocab.json").read_bytes()
    with (phase / "metrics.csv").open() as handle:
        steps = [int(row["step"]) for row in csv.DictReader(handle) if row.get("step")]
    assert steps and max(steps) <= 3  # a new run: its steps count from zero
    code = main(["evaluate", "--model", str(phase), "--split", "test", "--limit", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "rouge" in out.lower()
    # A phase whose model differs otherwise (another hidden size) is refused before any file.
    bad = tmp_path / "bad"
    argv = ["train", str(CONFIG), "--quiet", "--threads", "1"]
    for item in (*TINY, f"out_dir={bad}", "model.hidden_dim=12", "model.copy_attention=decoder",
                 f"train.init_from={first}"):  # fmt: skip
        argv += ["--set", item]
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert "train.init_from" in err and "tensors of another shape" in err
    assert len(err.strip().splitlines()) == 1
    assert not (bad / "config.json").exists()
