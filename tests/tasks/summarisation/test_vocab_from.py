"""``data.vocab_from``: a text-to-text run reads another run's vocabulary instead of building one,
so that runs on different data (the replies alone against the replies with their contexts)
score perplexity over the same words."""

from __future__ import annotations

from pathlib import Path

import pytest

from qkv.cli.main import main
from qkv.tasks.summarisation.config import SummaryDataConfig

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs/tiny/copy-pointer-rnn.yaml"
TINY = ["data.options.n_valid=10", "data.options.n_test=10", "data.valid_examples=0",
        "model.hidden_dim=16", "model.embed_dim=8", "train.max_steps=2", "train.eval_every=2",
        "train.warmup_steps=1", "train.tensorboard=false"]  # fmt: skip


def _train(capsys, out: Path, *sets: str) -> tuple[int, str]:
    argv = ["train", str(CONFIG), "--quiet", "--threads", "1"]
    for item in (*TINY, f"out_dir={out}", *sets):
        argv += ["--set", item]
    code = main(argv)
    return code, capsys.readouterr().err


def test_a_run_reads_the_vocabulary_of_the_run_it_names(tmp_path, capsys):
    big, small, same = tmp_path / "big", tmp_path / "small", tmp_path / "same"
    assert _train(capsys, big, "data.options.n_train=300")[0] == 0
    assert _train(capsys, small, "data.options.n_train=20")[0] == 0
    # the smaller corpus builds another vocabulary (so the check below can fail) ...
    assert (small / "vocab.json").read_bytes() != (big / "vocab.json").read_bytes()
    code, err = _train(capsys, same, "data.options.n_train=20", f"data.vocab_from={big}")
    assert code == 0, err
    # ... and with data.vocab_from it reads the named run's, which its model is sized by
    assert (same / "vocab.json").read_bytes() == (big / "vocab.json").read_bytes()
    code = main(["evaluate", "--model", str(same), "--split", "test", "--limit", "3"])
    assert code == 0, capsys.readouterr().err


def test_a_missing_vocabulary_or_two_different_runs_are_refused_before_any_file(tmp_path, capsys):
    first = tmp_path / "first"
    assert _train(capsys, first, "data.options.n_train=20")[0] == 0
    bad = tmp_path / "bad"
    code, err = _train(capsys, bad, f"data.vocab_from={tmp_path / 'nowhere'}")
    assert code == 2
    assert "data.vocab_from=" in err and "vocab.json is missing" in err
    assert not (bad / "config.json").exists()
    code, err = _train(capsys, bad, f"train.init_from={first}", f"data.vocab_from={tmp_path}")
    assert code == 2
    assert "name different runs" in err and "leave out data.vocab_from" in err
    assert not (bad / "config.json").exists()


@pytest.mark.parametrize("value", ["", "  ", 3, True])
def test_vocab_from_must_name_a_directory(value):
    with pytest.raises(ValueError, match=r"data\.vocab_from must be a trained run's directory"):
        SummaryDataConfig(vocab_from=value)
