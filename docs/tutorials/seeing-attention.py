# %% [markdown]
# # Seeing attention: every view, on models trained here
#
# This tutorial trains small models from the configurations shipped with qkv (`qkv configs`
# lists them) and looks at each kind of attention view qkv draws: cross- and self-attention of a
# Transformer translator with its query and key vectors (the neuron view) and a comparison of an
# early and a late model; the pointer-generator's copy attention and `p_gen`; a classifier's
# attention-pooling weights; named entities marked over a tagger's self-attention; a character
# language model's causal attention; a Vision Transformer's
# patch maps, rollout and flow; Show, Attend and Tell's map over the image for each word.
#
# Every view below is the explorer's page in a sandboxed frame: it loads nothing from the
# network, so it works offline. The selectors pick the layer and head; the buttons save PNG or
# SVG; `seen.save("figure.svg")` does the same from Python.
#
# **Budget.** The full run takes about ten minutes on a 2-core CPU. One switch sets every
# budget: the environment variable `QKV_TUTORIAL_MODE` (`full`, the default, or `smoke`: a few
# steps of each, the same code, which the tests run).

# %%
import os
import tempfile
from pathlib import Path

import torch
from IPython.display import display

import qkv
from qkv.data.images.datasets import load_digits
from qkv.tasks.spec import ViewOptions

MODE = os.environ.get("QKV_TUTORIAL_MODE", "full")
if MODE not in ("full", "smoke"):
    raise ValueError(f"QKV_TUTORIAL_MODE must be full or smoke, got {MODE!r}")


def budget(full, smoke):
    """The full run's value, or the smoke run's."""
    return full if MODE == "full" else smoke


RUNS = Path(tempfile.mkdtemp(prefix="qkv-tutorial-"))
QUIET = {"train__tensorboard": False, "train__checkpoint_every": None}


def train(preset: str, name: str, **overrides) -> Path:
    """Train ``preset`` into ``RUNS / name`` with ``overrides`` (and, in a smoke run, one warm-up
    step); the trained model's folder."""
    smoke = {} if MODE == "full" else {"train__warmup_steps": 1}
    return qkv.train(preset, out_dir=str(RUNS / name), **QUIET, **smoke, **overrides)


# %% [markdown]
# ## A Transformer translator: cross-attention, self-attention, the neuron view
#
# `tiny/reverse-transformer` learns to reverse sequences of symbols (Sockeye's learning test):
# the right answer is known, so its cross-attention should be the anti-diagonal, each output
# symbol attending to its mirror image in the source. The views: the cross-attention (each
# output row over the source columns), the encoder's self-attention and the decoder's causal
# self-attention. With `ViewOptions(neuron=True)` each view also carries the query and key
# vectors its weights were computed from: the page's "neuron" view shows, for one query and one
# key, the vectors per dimension and their elementwise product, which sums (scaled by
# 1/sqrt(d_k)) to the score before the softmax.

# %%
reverse = {
    "data__options__n_train": budget(20000, 300),
    "data__valid_bleu_sentences": budget(200, 0),
    "train__eval_every": budget(400, 2),
}
late = train("tiny/reverse-transformer", "reverse", train__max_steps=budget(800, 3), **reverse)
translator = qkv.load(late)
sentence = "a b c d e f"
seen = translator.views(sentence, ViewOptions(neuron=True))
print(seen.describe())
display(seen)

# %% [markdown]
# ## Comparing two models: early against late
#
# The same configuration stopped after 40 steps. To compare attention, both models must read the
# same tokens, so the early model is given the late model's translation to read
# (`ViewOptions(target=...)`: teacher forcing on a given output instead of its own). `Seen.compare`
# then puts the two models' views side by side with their difference (late minus early): the
# anti-diagonal appears as training goes on.

# %%
steps = {"early": budget(40, 2), "late": budget(800, 3)}
early = train("tiny/reverse-transformer", "reverse-early", train__max_steps=steps["early"],
              **reverse)  # fmt: skip
forced = ViewOptions(target=seen.output["text"])  # both read the late model's translation
compared = (
    qkv.load(early)
    .views(sentence, forced)
    .compare(
        translator.views(sentence, forced),
        names=(f"{steps['early']} steps", f"{steps['late']} steps"),
    )
)
display(compared)

# %% [markdown]
# ## The pointer-generator: copy attention and `p_gen`
#
# `tiny/copy-pointer-rnn` summarises texts whose summaries are invented names used once in the
# whole corpus, so the model can only get them right by copying (See et al. 2017). The first
# view is the copy distribution over the source for each output word, with `p_gen`, the
# probability of generating from the vocabulary rather than copying, per output word.

# %%
pointer = train("tiny/copy-pointer-rnn", "copy", train__max_steps=budget(200, 2),
                data__options__n_train=budget(3000, 200))  # fmt: skip
summariser = qkv.load(pointer)
display(summariser.views("the king of bavotek went to rulamip and spoke"))

# %% [markdown]
# ## A classifier's attention pooling
#
# `classify/rt-bilstm-attention` is Lin et al.'s (2017) structured self-attention on Rotten
# Tomatoes snippets: a BiLSTM, then several attention "hops", each a distribution over the words
# that builds part of the sentence's vector. `ViewOptions(pooling=True)` puts the pooling
# weights first (hop by word).

# %%
sentiment = train("classify/rt-bilstm-attention", "sentiment", train__max_steps=budget(300, 2),
                  train__max_minutes=None, train__eval_every=budget(150, 2))  # fmt: skip
classifier = qkv.load(sentiment)
display(classifier.views("a gorgeous , witty , seductive movie .", ViewOptions(pooling=True)))

# %% [markdown]
# ## Named entities over a tagger's self-attention
#
# `ner/wnut-transformer-crf` tags named entities in tweets (WNUT-16) with a small Transformer
# encoder and a CRF. The output line marks each entity with its type; the view is the encoder's
# self-attention over the sentence's pieces. (A few hundred steps find the common types only.)

# %%
entities = train("ner/wnut-transformer-crf", "ner", train__max_steps=budget(400, 2),
                 train__eval_every=budget(200, 2))  # fmt: skip
tagger = qkv.load(entities)
display(tagger.views("Heading to the Empire State Building with Paul tonight in New York"))

# %% [markdown]
# ## A character language model's causal attention
#
# `tiny/lm-kjv-char` is a tiny GPT on the King James Bible, one character per token; each
# character attends only to itself and the ones before it. `new_tokens` lets it continue the
# text and shows the attention of what it wrote too.

# %%
characters = train("tiny/lm-kjv-char", "lm", train__max_steps=budget(300, 2),
                   train__eval_every=budget(150, 2))  # fmt: skip
language_model = qkv.load(characters)
display(language_model.views("In the beginning God", ViewOptions(new_tokens=20)))

# %% [markdown]
# ## A Vision Transformer: patch maps, rollout and flow
#
# `vit/digits` classifies scikit-learn's 8x8 digits with 2x2 patches. The view lays the
# `[CLS]` token's attention over the image per layer and head; `ViewOptions(rollout=True)` adds
# attention rollout and attention flow (Abnar & Zuidema 2020), which follow the attention
# through every layer down to the patches.

# %%
digits = train("vit/digits", "vit", train__max_steps=budget(900, 2), train__max_minutes=None,
               train__eval_every=budget(300, 2))  # fmt: skip
vit = qkv.load(digits)
held_out = load_digits()  # its test split was never seen in training
test_digits, test_labels = held_out.test_images, held_out.test_labels  # (N, 1, 8, 8) uint8, (N,)
print("the image is a", held_out.classes[test_labels[0]])
display(vit.views(test_digits[0], ViewOptions(rollout=True)))

# %% [markdown]
# ## Show, Attend and Tell: where the captioner looks for each word
#
# `caption/tiny` names the digits on a strip of one or two of the same 8x8 digits; for each word
# it writes, the view shows its soft attention over the strip's cells.

# %%
strips = train("caption/tiny", "caption", train__max_steps=budget(300, 2),
               data__train_strips=budget(2000, 64))  # fmt: skip
captioner = qkv.load(strips)
strip = torch.cat([test_digits[1], test_digits[2]], dim=-1)  # (1, 8, 16): two digits side by side
print("the strip shows", held_out.classes[test_labels[1]], held_out.classes[test_labels[2]])
display(captioner.views(strip))
