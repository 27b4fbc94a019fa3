"""The translation task in process (seconds, not minutes): a run directory is self-contained, and
so is every snapshot the budget clock leaves behind."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from qkv.manifest import ManifestError, file_entry, read_manifest
from qkv.models import lean_step
from qkv.models.registry import build_config, build_model
from qkv.tasks.run_config import load_run_config
from qkv.tasks.run_dir import load_model_run_config, snapshot_dir
from qkv.tasks.run_skeleton import run_training
from qkv.tasks.translation.runner import Translator
from qkv.tasks.translation.train import evaluate_translation
from qkv.training import trainer
from qkv.training.checkpoint import CheckpointError
from tests.training.test_trainer import FakeClock


@pytest.fixture(scope="module")
def snapshotted_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    config = load_run_config(
        "configs/tiny/reverse-transformer.yaml",
        [
            f"out_dir={out}",
            "data.options.n_train=300",
            "data.options.n_valid=20",
            "data.options.n_test=20",
            "data.valid_bleu_sentences=10",
            "train.clock=cpu",
            "train.max_minutes=1",
            "train.snapshot_minutes=[0.25, 0.5, 1]",
            "train.eval_every=5",
            "train.patience=null",
        ],
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(trainer.CLOCKS, "cpu", FakeClock(tick=3.0))  # 3 s of "CPU" per step
        trained = run_training(config)
    return out, trained


def test_budget_stops_the_run_and_leaves_one_snapshot_per_mark(snapshotted_run):
    out, trained = snapshotted_run
    assert trained.result.stopped == "max_minutes"
    steps = []
    for minutes in (0.25, 0.5, 1.0):
        directory = snapshot_dir(out, minutes)
        saved = json.loads((directory / "config.json").read_text())
        assert saved["snapshot"]["minutes"] == minutes
        steps.append(saved["snapshot"]["step"])
    assert steps == [5, 10, 20] and trained.result.steps == 20
    assert snapshot_dir(out, 0.25).name == "0.25min" and snapshot_dir(out, 1).name == "1min"


def test_snapshots_hold_the_weights_of_their_moment(snapshotted_run):
    out, _ = snapshotted_run
    early = load_file(snapshot_dir(out, 0.25) / "model.safetensors")
    late = load_file(snapshot_dir(out, 1) / "model.safetensors")
    assert early.keys() == late.keys()
    assert any(not torch.equal(early[k], late[k]) for k in early)


def test_a_snapshot_is_a_model_directory_of_its_own(snapshotted_run):
    out, _ = snapshotted_run
    directory = snapshot_dir(out, 0.5)
    translator = Translator.load(directory)
    assert load_model_run_config(directory).family == "transformer"
    (translation,) = translator.translate(["a b c"], beam_size=2)
    assert isinstance(translation.text, str)
    report = evaluate_translation(directory, beam_size=1)
    results = json.loads((directory / "results.json").read_text())
    assert results["test"]["sentences"] == report.scores.sentences == 20
    assert not (out / "results.json").exists()  # the run's own directory is left alone


def test_a_config_that_is_not_an_object_is_a_checkpoint_error(tmp_path):
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="JSON object"):
        load_model_run_config(tmp_path)


def test_batch_size_never_changes_a_translation(snapshotted_run):
    out, _ = snapshotted_run
    translator = Translator.load(out)
    texts = ["a b c d e", "f", "g h i", "j a", "b c d e f g h"]
    one = [t.text for t in translator.translate(texts, beam_size=3, batch_size=1)]
    many = [t.text for t in translator.translate(texts, beam_size=3, batch_size=4, progress=True)]
    assert one == many
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        translator.translate(texts, batch_size=0)


@pytest.mark.parametrize("beam", [1, 3])
def test_the_lean_decode_step_translates_as_the_module_path(snapshotted_run, monkeypatch, beam):
    """The Translator decodes a Transformer through its lean step; the module path (the
    searches over ``Transformer.step``) gives the same translations and attention."""
    out, _ = snapshotted_run
    texts = ["a b c d e", "f", "g h i", "j a", "b c d e f g h"]
    lean = Translator.load(out).translate(texts, beam_size=beam, attention=True)
    monkeypatch.setattr(lean_step, "has_lean_step", lambda model: False)
    module = Translator.load(out).translate(texts, beam_size=beam, attention=True)
    assert [t.target_ids for t in lean] == [t.target_ids for t in module]
    for ours, theirs in zip(lean, module, strict=True):
        torch.testing.assert_close(ours.attention, theirs.attention, atol=1e-5, rtol=0)
    assert all(t.attention is None for t in Translator.load(out).translate(texts))


def test_patience_is_a_decode_setting(snapshotted_run):
    out, _ = snapshotted_run
    translator = Translator.load(out)
    texts = ["a b c d e", "f", "g h i", "j a", "b c d e f g h"]
    exact = [t.target_ids for t in translator.translate(texts, beam_size=4)]
    translator.decode = replace(translator.decode, patience=1.0)
    patient = [t.target_ids for t in translator.translate(texts, beam_size=4)]
    assert len(patient) == len(exact)  # the same search stopped earlier; may differ per text
    with pytest.raises(ValueError, match=r"decode\.patience must be a number > 0 or null"):
        replace(translator.decode, patience=0)


def test_lower_precisions_need_the_lean_step(snapshotted_run):
    out, _ = snapshotted_run
    translator = Translator.load(out, precision="bfloat16")
    assert translator.precision == "bfloat16"
    assert len(translator.translate(["a b c"])) == 1
    with pytest.raises(ValueError, match="precision must be one of float32, bfloat16, int8"):
        Translator.load(out, precision="float16")
    rnn = build_model(
        "seq2seq_rnn", build_config("seq2seq_rnn", {"src_vocab_size": 10, "tgt_vocab_size": 10})
    )
    with pytest.raises(ValueError, match="decodes in float32 only"):
        Translator(rnn, translator.source_tokenizer, translator.target_tokenizer,
                   translator.decode, precision="int8")  # fmt: skip


def test_the_report_shows_the_first_and_then_the_shortest_sentences():
    """After the scores: the split's first sentences, then its shortest ones of at least four
    words (none shown twice, split order among equal lengths)."""
    from qkv.evaluation.bleu import corpus_scores
    from qkv.tasks.translation.runner import EvaluationReport

    sources = [
        "a b c d e f g",
        "a b",
        "one two three four five",
        "w x y z",
        "p q r s t u",
        "k l m n",
    ]
    examples = [(s, s.upper(), s) for s in sources]
    report = EvaluationReport("test", corpus_scores(sources, sources), [], examples, 4, 1.0)
    assert report.short_examples(2, shown=examples[:1]) == [examples[3], examples[5]]
    repeated = EvaluationReport("test", report.scores, [], [examples[3], *examples], 4, 1.0)
    assert repeated.short_examples(2) == [examples[3], examples[5]]  # a recurring verse once
    lines = report.lines(2)
    text = "\n".join(lines)
    assert "the first sentences of test:" in text and "short sentences of test:" in text
    shown = [
        line[len("  source") :].strip()
        for line in text.splitlines()
        if line.startswith("  source ")
    ]
    assert shown == [sources[0], sources[1], sources[3], sources[5]]
    none = report.lines(0)
    assert none == lines[: len(none)] and not any("  source " in line for line in none)


def test_a_snapshot_carries_its_own_manifest(snapshotted_run, tmp_path):
    out, _ = snapshotted_run
    directory = Path(shutil.copytree(snapshot_dir(out, 0.5), tmp_path / "snapshot"))
    entries = read_manifest(directory)
    assert entries is not None and set(entries) == {
        "config.json", "model.safetensors", "source_tokenizer.json", "target_tokenizer.json"
    }  # fmt: skip
    assert entries["model.safetensors"] == file_entry(directory / "model.safetensors")
    assert entries["model.safetensors"] != read_manifest(snapshot_dir(out, 1))["model.safetensors"]
    shutil.copyfile(snapshot_dir(out, 1) / "model.safetensors", directory / "model.safetensors")
    with pytest.raises(ManifestError, match=r"model\.safetensors has changed since it was saved"):
        Translator.load(directory)  # another snapshot's weights: refused, not loaded


@pytest.mark.parametrize("beam", [1, 3])
def test_batches_decoded_at_once_give_the_same_translations(snapshotted_run, beam):
    out, _ = snapshotted_run
    texts = ["a b c d e", "f", "g h i", "j a", "b c d e f g h", "c", "d e", "h g f e d"]
    translator = Translator.load(out)
    one = translator.translate(texts, beam_size=beam, batch_size=2, workers=1, attention=True)
    several = translator.translate(texts, beam_size=beam, batch_size=2, workers=3, attention=True)
    assert [t.target_ids for t in several] == [t.target_ids for t in one]
    for a, b in zip(several, one, strict=True):
        assert torch.equal(a.attention, b.attention)
