# %% [markdown]
# # Encoders that label: tags, entities and sentiment
#
# An encoder reads a whole sentence at once and gives each token a vector that knows its
# context. Three classic ways to turn those vectors into labels, each trained here from scratch
# on a small budget and scored with its field's metric:
#
# - **one label per word**: part-of-speech tags (`tag/pos-bilstm`: a BiLSTM with a
#   self-attention layer), scored by tag accuracy;
# - **labels that must agree with each other**: named entities in BIO tags, where `I-person`
#   may only follow `B-person` or `I-person`. Lample et al. (2016, eq. 1) score the whole tag
#   sequence with a linear-chain CRF over the encoder's per-word scores `P`,
#   `score(x, y) = Σ_i A[y_{i-1}, y_i] + Σ_i P[i, y_i]`, and decode with Viterbi
#   (`ner/wnut-bilstm-crf`, tweets of WNUT-16), scored by entity F1 (type and both boundaries
#   right);
# - **one label per sentence**: sentiment of film reviews with Lin et al.'s (2017) structured
#   self-attention (`classify/rt-bilstm-attention`): `r` attention "hops"
#   `A = softmax(W_s2 tanh(W_s1 H^T))`, each a distribution over the words, pool the BiLSTM's
#   states `H` into `M = A H`; a penalty `||A A^T - I||_F^2` pushes the hops apart. Scored by
#   accuracy; the hops say which words the label was read from.
#
# **Budget.** The full run is sized for about ten minutes on a 2-core CPU; the notebook's
# metadata (`qkv.seconds`) records how long the run shown here took. One switch sets every
# budget: the environment variable `QKV_TUTORIAL_MODE` (`full`, the default, or `smoke`: a few
# steps of each on a slice of the data, the same code, which the tests run).

# %%
import os
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import display

import qkv
from qkv.tasks.spec import ViewOptions

MODE = os.environ.get("QKV_TUTORIAL_MODE", "full")
if MODE not in ("full", "smoke"):
    raise ValueError(f"QKV_TUTORIAL_MODE must be full or smoke, got {MODE!r}")


def budget(full, smoke):
    """The full run's value, or the smoke run's."""
    return full if MODE == "full" else smoke


RUNS = Path(tempfile.mkdtemp(prefix="qkv-tutorial-"))
QUIET = {"train__tensorboard": False, "train__checkpoint_every": None}
LIMIT = budget(None, 40)  # the test sentences scored: all of them (a smoke run: the first 40)


def train(preset: str, name: str, **overrides) -> Path:
    """Train ``preset`` into ``RUNS / name`` with ``overrides`` (and, in a smoke run, one warm-up
    step and small batches); the trained model's folder."""
    smoke = {} if MODE == "full" else {"train__warmup_steps": 1, "train__batch_tokens": 256}
    return qkv.train(preset, out_dir=str(RUNS / name), **QUIET, **smoke, **overrides)


# %% [markdown]
# ## Parts of speech: one tag per word
#
# Trained on automatically tagged text of the Open American National Corpus and scored on the
# gold tags of Wall Street Journal sentences, in Penn Treebank's tag set. The report counts the
# words unseen in training apart: there the tagger has only the context and the word's
# subwords to go on.

# %%
pos = train("tag/pos-bilstm", "pos", train__max_steps=budget(300, 2), train__max_minutes=None,
            train__eval_every=budget(150, 2),
            data__options__valid_size=budget(1000, 20),
            data__options__train_size=budget(None, 200))  # fmt: skip
pos_tagger = qkv.load(pos)
pos_report = pos_tagger.report("test", limit=LIMIT)
print("\n".join(pos_report.lines))

# %%
sentence = "The old man the boats while the young can watch them ."
print(" ".join(f"{word}/{tag}" for word, tag in pos_tagger.tag([sentence])[0]))

# %% [markdown]
# ## Named entities with a CRF
#
# WNUT-16's tweets have ten entity types (person, geo-loc, company, ...); there are few of them
# and tweets are noisy, so the field's scores are low: the shared task's best system scored
# about 0.52 F1. The report gives the entity F1 with a bootstrap interval over the test tweets
# (the few entities it counts cannot separate models finely) and the score per type.

# %%
ner = train("ner/wnut-bilstm-crf", "ner", train__max_steps=budget(1000, 2),
            train__eval_every=budget(300, 2))  # fmt: skip
entity_tagger = qkv.load(ner)
ner_report = entity_tagger.report("test", limit=LIMIT)
print("\n".join(ner_report.lines))

# %%
tweet = "Heading to the Empire State Building with Paul tonight in New York"
for entity in entity_tagger.entities([tweet])[0]:
    print(entity)

# %% [markdown]
# What the CRF learned: its transition scores `A[from, to]`. Look at the `I-` columns: moving
# into `I-x` from anything but `B-x` or `I-x` should score low (a move BIO forbids), because the
# training tags never make it. (Decoding forbids such moves outright; the scores are learned
# without that rule.)

# %%
crf = entity_tagger.model.crf
tags = list(entity_tagger.tags)
fig, ax = plt.subplots(figsize=(7.5, 6.5), dpi=80)
image = ax.imshow(crf.transitions.detach(), cmap="RdBu_r", vmin=-2, vmax=2)
ax.set_xticks(range(len(tags)), tags, rotation=90, fontsize=7)
ax.set_yticks(range(len(tags)), tags, fontsize=7)
ax.set_xlabel("to")
ax.set_ylabel("from")
ax.set_title("CRF transition scores A[from, to]")
fig.colorbar(image)
plt.show()
to_inside = [i for i, t in enumerate(tags) if t.startswith("I-")]
allowed = [
    crf.transitions[i, j].item()
    for j in to_inside
    for i, t in enumerate(tags)
    if t[2:] == tags[j][2:] and t != "O"
]
forbidden = [
    crf.transitions[i, j].item()
    for j in to_inside
    for i, t in enumerate(tags)
    if t == "O" or t[2:] != tags[j][2:]
]
print(f"mean score into I-x: from B-x/I-x {sum(allowed) / len(allowed):+.3f}, "
      f"from anything else {sum(forbidden) / len(forbidden):+.3f}")  # fmt: skip
if MODE == "full":
    assert sum(allowed) / len(allowed) > sum(forbidden) / len(forbidden)

# %% [markdown]
# ## Sentiment with structured self-attention
#
# Rotten Tomatoes snippets, fresh or rotten (the bar to beat: always answering the more frequent
# label of the test split, printed below the report). Ten hops of attention
# pool the BiLSTM's states; Lin et al. (2017, figure 2) show that the hops settle on the words
# that carry the sentiment.

# %%
rt = train("classify/rt-bilstm-attention", "sentiment", train__max_steps=budget(900, 2),
           train__max_minutes=None, train__eval_every=budget(300, 2),
           data__valid_examples=budget(None, 20))  # fmt: skip
classifier = qkv.load(rt)
rt_report = classifier.report("test", limit=LIMIT)
print("\n".join(rt_report.lines))
support = [scores["support"] for scores in rt_report.record["per_label"].values()]
majority = max(support) / sum(support)
print(f"always the majority label: {majority:.4f}")
if MODE == "full":
    assert rt_report.record["accuracy"] > majority + 0.03, (rt_report.record, majority)

# %% [markdown]
# What the pooling attends to: `views(text, ViewOptions(pooling=True))` puts the pooling
# weights first (hop by token) in the explorer's view (a BiLSTM has no self-attention of its
# own to show after them). The static figure (`seen.figure(view="pooling")`) shows every hop:
# look for the columns of the words that decide the label, and for hops that differ from each
# other, which is what the penalty asks of them.

# %%
review = "a gorgeous , witty , seductive movie ."
seen = classifier.views(review, ViewOptions(pooling=True))
print(seen.describe())
display(seen)
display(seen.figure(view="pooling", layer=0))
plt.close("all")

# %% [markdown]
# Two more reviews, with the label predicted and, for each hop, the token it weighs most. When
# the hops are nearly one-hot, as the penalty pushes them to be, their average gives about
# `1/r` to each token some hop picked, so the hops one by one say more than their mean: look
# for whether the picked tokens are the words that carry the sentiment, and whether the
# predicted label is right (at this budget the classifier is far from Lin et al.'s).

# %%
for text in ["the plot is thin and the acting is wooden .",
             "an utterly charming and hilarious film ."]:  # fmt: skip
    tokens, weights = classifier.pooling_weights(text)  # (r, T)
    picked = [tokens[i] for i in weights.argmax(-1).tolist()]  # (r,): each hop's strongest token
    print(f"{classifier.predict([text])[0].output()['summary']:<16} {text}")
    print("   each hop's strongest token:", " | ".join(picked))
