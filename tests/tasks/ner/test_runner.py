"""The entity tagger on raw and long text.

- Raw text is split as the training corpus was: a tiny tagger trained on WNUT-16 saves
  ``data.splitter: tweets``, reads it back, and its runner (``tag``, ``views``, ``qkv tag``)
  receives ``@Cromwell`` as one word with the mention's word shape; a run saved before the key
  existed loads with its corpus's scheme; a scheme the YAML names is kept, an unknown one
  refused.
- Long text is tagged in overlapping windows: a hand-built tagger that sees an entity only when
  both its words are in one window finds it whole at every position of a long text, with a
  softmax and with a CRF output; a text of one window is tagged exactly as that window decodes.
"""

from __future__ import annotations

import json
import random
import shutil
import types
import warnings
from pathlib import Path

import pytest
import torch

from qkv.cli.main import main
from qkv.data.labelled.entities import WNUT16_REQUIREMENT, WNUT16_WHEEL
from qkv.data.labelled.word_shape import SHAPES
from qkv.data.tokens.subword import SubwordTokenizer
from qkv.layers.text_encoder import TextEncoderConfig
from qkv.models.tagger import SequenceTagger, SequenceTaggerConfig
from qkv.tasks import tagging
from qkv.tasks.encoder_inputs import TextInputs
from qkv.tasks.encoder_run import EncoderModel
from qkv.tasks.input_checks import InputWarning
from qkv.tasks.ner.config import EntityDataConfig
from qkv.tasks.ner.runner import EntityTagger
from qkv.tasks.run_config import run_config_from_dict
from qkv.tasks.run_skeleton import run_training
from qkv.tasks.tagging.inputs import collate_tagging, decode_tags, encode_sentences, word_scores
from tests.data.conftest import needs_wheel

pytestmark = pytest.mark.usefixtures("one_thread")
needs_wnut = needs_wheel(WNUT16_REQUIREMENT, WNUT16_WHEEL)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def _ner_config(out_dir, data: dict, model: dict | None = None, steps: int = 2):
    return run_config_from_dict(
        {
            "task": "ner",
            "out_dir": str(out_dir),
            "data": data,
            "model": {"family": "sequence_tagger", **(model or {})},
            "train": {"max_steps": steps, "batch_tokens": 1024, "eval_every": steps,
                      "checkpoint_every": None, "label_smoothing": 0.0, "tensorboard": False},
        }
    )  # fmt: skip


# --------------------------------------------------------------------- the word splitter


@pytest.fixture(scope="module")
def wnut_run(tmp_path_factory) -> Path:
    """A tiny entity tagger (with the casing feature) trained two steps on WNUT-16."""
    out = tmp_path_factory.mktemp("wnut") / "run"
    data = {"corpus": "wnut16", "vocab_size": 300, "max_len": 64}
    model = {"preset": "tiny", "max_len": 64, "casing_dim": 4, "crf": True}
    run_training(_ner_config(out, data, model))
    return out


@needs_wnut
def test_the_scheme_of_the_corpus_is_saved_and_the_runner_reads_mentions_whole(
    wnut_run, monkeypatch, capsys
):
    saved = json.loads((wnut_run / "config.json").read_text(encoding="utf-8"))
    assert saved["data"]["splitter"] == "tweets"
    tagger = EntityTagger.load(wnut_run)
    assert tagger.splitter == "tweets"

    seen = []

    def spy(inputs, sentences, tags, **options):
        examples, spans = encode_sentences(inputs, sentences, tags, **options)
        seen.append((sentences, examples))
        return examples, spans

    monkeypatch.setattr(tagging.runner, "encode_sentences", spy)
    text = "@Cromwell: the court at #Hampton, http://t.co/x?y=1."
    words = ["@Cromwell", ":", "the", "court", "at", "#Hampton", ",", "http://t.co/x?y=1", "."]
    assert [word for word, _ in tagger.tag([text])[0]] == words
    (sentences, examples), = seen  # fmt: skip
    assert sentences == [words]
    example = examples[0]
    assert [example.shapes[i] for i in example.first[:1] + example.first[5:6]] == [
        SHAPES.index("mention"), SHAPES.index("hashtag")
    ]  # fmt: skip
    assert example.shapes[example.first[7]] == SHAPES.index("link")

    assert [word for word, _ in tagger.views("@Cromwell at #Hampton").output["tags"]] == [
        "@Cromwell", "at", "#Hampton"
    ]  # fmt: skip
    assert main(["tag", "--model", str(wnut_run), "--format", "words", "hi @Cromwell:"]) == 0
    out = capsys.readouterr().out
    assert [pair.rsplit("/", 1)[0] for pair in out.split()] == ["hi", "@Cromwell", ":"]


@needs_wnut
def test_a_run_saved_without_a_scheme_loads_with_its_corpus_scheme(wnut_run, tmp_path):
    for corpus, scheme in (("wnut16", "tweets"), ("file", "plain")):
        old = tmp_path / corpus
        shutil.copytree(wnut_run, old)
        saved = json.loads((old / "config.json").read_text(encoding="utf-8"))
        del saved["data"]["splitter"]  # as qkv wrote it before the key existed
        (old / "manifest.json").unlink()  # and before it kept a manifest
        saved["data"]["corpus"] = corpus
        (old / "config.json").write_text(json.dumps(saved), encoding="utf-8")
        tagger = EntityTagger.load(old)
        assert tagger.splitter == scheme
        expected = ["@Cromwell"] if scheme == "tweets" else ["@", "Cromwell"]
        assert [word for word, _ in tagger.tag(["@Cromwell"])[0]] == expected


def test_a_named_scheme_is_kept_and_an_unknown_one_refused():
    assert EntityDataConfig().splitter == "tweets"  # wnut16, the default corpus
    assert EntityDataConfig(corpus="file", splitter="tweets").splitter == "tweets"
    assert EntityDataConfig(corpus="wnut16", splitter="plain").splitter == "plain"
    assert _ner_config("x", {"corpus": "file"}).data.splitter == "plain"
    with pytest.raises(ValueError, match=r"data\.splitter must be one of plain, tweets.*'twitter'"):
        _ner_config("x", {"corpus": "file", "splitter": "twitter"})


def test_old_fixture_runs_split_as_they_always_did():
    for name in ("ner", "tagging"):
        saved = json.loads((FIXTURES / name / "config.json").read_text(encoding="utf-8"))
        assert "splitter" not in saved["data"]
    tagger = EntityTagger.load(FIXTURES / "ner")
    assert tagger.splitter == "plain"


# --------------------------------------------------------------------- windows

MAX_LEN = 16  # 14 subwords a window
TAGS = ("B-LOC", "I-LOC", "O")
FILLER = ["we", "walk", "to", "the", "park", "today", "Kzwq"]  # Kzwq: several subwords


@pytest.fixture(scope="module")
def inputs() -> TextInputs:
    bpe = SubwordTokenizer.train([" ".join([*FILLER[:-1], "New", "York", "zq"])] * 50, 80)
    made = TextInputs.from_json(bpe.to_json(), kind="bpe", max_len=MAX_LEN, source="test BPE")
    sizes = [len(piece) for piece in made.subwords([*FILLER, "New", "York"])]
    assert sizes[-2:] == [1, 1] and max(sizes) > 1  # one id each for New and York
    return made


def _hand_built(inputs: TextInputs, crf: bool) -> EntityTagger:
    """An entity tagger whose scores see "New York" as a place only when both words are in its
    window: "New" is B-LOC when "York" follows it, "York" I-LOC when "New" precedes it."""
    new, york = (inputs.subwords([w])[0][0] for w in ("New", "York"))
    text = TextEncoderConfig(vocab_size=inputs.vocab_size, d_model=8, num_heads=2, num_layers=1,
                             d_ff=16, dropout=0.0, max_len=MAX_LEN)  # fmt: skip
    model = SequenceTagger(SequenceTaggerConfig(text, num_tags=len(TAGS), crf=crf))
    if model.crf is not None:
        with torch.no_grad():
            for parameter in model.crf.parameters():
                parameter.zero_()  # the CRF decodes the scores' constrained argmax

    def forward(ids, keep=None, shapes=None, need_weights=False):
        is_new, is_york = ids == new, ids == york  # (B, T)
        logits = torch.zeros(*ids.shape, len(TAGS))  # (B, T, K)
        logits[..., TAGS.index("O")] = 1.0
        logits[..., TAGS.index("B-LOC")] += 5.0 * (is_new & is_york.roll(-1, dims=1))
        logits[..., TAGS.index("I-LOC")] += 5.0 * (is_york & is_new.roll(1, dims=1))
        return types.SimpleNamespace(logits=logits, attentions=None)

    model.forward = forward  # type: ignore[method-assign]
    config = _ner_config("unused", {"corpus": "file", "max_len": MAX_LEN})
    return EntityTagger(EncoderModel(model, inputs, TAGS), config)


@pytest.mark.parametrize("crf", [False, True])
def test_an_entity_across_every_window_edge_comes_out_whole(inputs, crf):
    tagger = _hand_built(inputs, crf)
    rng = random.Random(0)
    filler = [rng.choice(FILLER) for _ in range(60)]
    windows = inputs.word_windows([*filler[:30], "New", "York", *filler[30:]])
    assert len(windows) > 4  # the text is many windows long
    cut = []
    for position in range(len(filler) + 1):
        words = [*filler[:position], "New", "York", *filler[position:]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            tags = tagger.tag_words([words])[0]
        expected = ["O"] * len(words)
        expected[position : position + 2] = ["B-LOC", "I-LOC"]
        if tags != expected:
            cut.append(position)
    assert cut == []


@pytest.mark.parametrize("name", ["ner", "tagging"])
def test_a_text_of_one_window_is_tagged_as_that_window_decodes(name):
    runner_class = EntityTagger if name == "ner" else tagging.runner.Tagger
    tagger = runner_class.load(FIXTURES / name)
    tokenizer = tagger.inputs.tokenizer
    vocabulary = [tokenizer.id_to_token(i) for i in range(4, tagger.inputs.vocab_size)]
    rng = random.Random(1)
    for _ in range(20):
        words = [rng.choice(vocabulary).lstrip("#") or "x" for _ in range(rng.randint(1, 12))]
        if len(tagger.inputs.word_windows(words)) > 1:
            continue
        ids, first = tagger.inputs.encode_words(words)
        examples, _ = encode_sentences(tagger.inputs, [words], None, casing=tagger.casing)
        batch = collate_tagging(examples, tagger.inputs.pad_id)
        with torch.inference_mode():
            path = decode_tags(tagger.model, word_scores(tagger.model, batch), batch.words,
                               tagger.rules)[0]  # fmt: skip
        assert examples[0].ids == ids and examples[0].first == first
        assert tagger.tag_words([words])[0] == [tagger.tags[t] for t in path]
