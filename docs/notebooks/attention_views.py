# %% [markdown]
# # Attention views in a notebook
#
# Every kind of attention view qkv draws, inline: what a trained model's `views(...)` returns
# displays itself (a `Seen`), and `qkv.show_attention` does the same for raw weights of any model.
# Each display is the explorer's page in a sandboxed frame that loads nothing from the network,
# so this notebook works offline and behind a firewall.
#
# The models are the tiny saved runs in `tests/fixtures/runs/` (one per task, trained for a few
# steps: their attention is not meaningful, their views are real). Run it with the repository
# root or this folder as the working directory (or set `QKV_NOTEBOOK_RUNS` to the fixture runs'
# directory): VS Code runs this file's `# %%` cells as they are; for Jupyter, make a notebook of
# it with `jupytext --to ipynb docs/notebooks/attention_views.py` and open that. With your own
# model, pass its run directory to `qkv.load` (`runs/demo` after `make demo`).
# `tests/viz/test_example_notebook.py` executes it headless in `make test`.

# %%
import os
from pathlib import Path

import torch
from IPython.display import display

import qkv
from qkv.tasks.spec import ViewOptions

# The fixture runs: from QKV_NOTEBOOK_RUNS, else seen from the repository root (VS Code's or a
# script's working directory) or from this notebook's folder (Jupyter's).
PLACES = [
    os.environ.get("QKV_NOTEBOOK_RUNS", ""),
    "tests/fixtures/runs",
    "../../tests/fixtures/runs",
]
RUNS = next((Path(p) for p in PLACES if p and (Path(p) / "translation").is_dir()), None)
if RUNS is None:
    raise FileNotFoundError(
        f"no fixture runs in {[p for p in PLACES if p]} (from {Path.cwd()}): run this notebook "
        "from the repository root or docs/notebooks/, or set QKV_NOTEBOOK_RUNS to "
        "tests/fixtures/runs"
    )

# %% [markdown]
# ## Translation: cross-attention, encoder self-attention, causal decoder self-attention
#
# A Transformer translator (trained on reversing letters). The first view is the
# cross-attention: each output token (row) over the source tokens (columns). Then the encoder's
# self-attention over the source, and the decoder's causal self-attention (each output token
# over the ones before it). The selectors pick the layer and the head; the head view shows every
# head at once.

# %%
translator = qkv.load(RUNS / "translation")
display(translator.views("a b c d"))

# %% [markdown]
# ## Classification: self-attention (and, for attention pooling, the pooling weights)
#
# A sentiment classifier; the output line is its label and probability, the view the encoder's
# self-attention. A classifier that pools with attention (`pooling: attention` or `structured` in
# its configuration) also has pooling weights, how much each word weighs in the sentence vector it
# reads: `views(text, ViewOptions(pooling=True))` puts them first. This tiny one pools with the
# mean, which has no weights, so it refuses that and says why (shown below).

# %%
classifier = qkv.load(RUNS / "classification")
display(classifier.views("the film was superb"))
try:
    classifier.views("the film was superb", ViewOptions(pooling=True))
except ValueError as refused:
    print(refused)

# %% [markdown]
# ## Tagging: self-attention of a part-of-speech tagger
#
# Each word's tag is in the output line; the view is the encoder's self-attention.

# %%
tagger = qkv.load(RUNS / "tagging")
display(tagger.views("to walk 7 ."))

# %% [markdown]
# ## Named entities: the entities marked, and the tagger's self-attention
#
# An entity tagger: the output line marks each entity with its type (`[Kalo](person)`), and the
# view is the encoder's self-attention over the sentence's subword pieces.

# %%
entities = qkv.load(RUNS / "ner")
display(entities.views("Mr Kalo is in Venbel ."))

# %% [markdown]
# ## Reading: question-to-passage attention
#
# A reader answers a cloze question (`XXXXX` is the blank) from a passage (the second line of the
# input). The output line is its answer and probability; the view is the question's attention
# over the passage's words (here the blank's).

# %%
reader = qkv.load(RUNS / "reading")
display(reader.views("the key opens XXXXX .\nMira walked and the key opens Kalo ."))

# %% [markdown]
# ## Summarisation: the pointer-generator's copy attention
#
# A pointer-generator summariser. Its first view is the copy attention: for each output word, the
# distribution it copies from over the source, with `p_gen` (the probability of generating from
# the vocabulary rather than copying) per output word; then the cross-attention.

# %%
summariser = qkv.load(RUNS / "summarisation")
display(summariser.views("the king of bavotek went to rulamip"))

# %% [markdown]
# ## Image classification: a ViT's attention over the image's patches
#
# A Vision Transformer on a digit. The view lays the `[CLS]` token's attention to each patch
# over the image, per layer and head.

# %%
vit = qkv.load(RUNS / "image_classification")
display(vit.views(vit.read_image(RUNS / "data" / "image_classification" / "digits1.png")))

# %% [markdown]
# ## Captioning: Show, Attend and Tell, one map over the strip per word
#
# A captioner reads a strip of digits and names them; for each word it writes, the view shows
# where over the strip it looked.

# %%
captioner = qkv.load(RUNS / "captioning")
display(captioner.views(captioner.read_image(RUNS / "data" / "captioning" / "digits2.png")))

# %% [markdown]
# ## Language model: causal self-attention
#
# A character-level language model; each character attends only to itself and the ones before.

# %%
language_model = qkv.load(RUNS / "language_model")
display(language_model.views("abc"))

# %% [markdown]
# ## Dialogue: a reply's attention over the conversation
#
# A dialogue model reads the conversation so far (turns separated by `<turn>`) and replies; its
# views are the reply's cross-attention over the conversation, then the encoder's and the
# decoder's self-attention.

# %%
replier = qkv.load(RUNS / "dialogue")
display(replier.views("How fares the king ? <turn> He sleeps ."))

# %% [markdown]
# ## Any model's weights: `qkv.show_attention`
#
# Raw attention weights with their token labels, here from PyTorch's own
# `nn.MultiheadAttention` (per head: `(H, Tq, Tk)`); a Hugging Face model's
# `[a[0] for a in outputs.attentions]` works the same, one `(H, Tq, Tk)` per layer.

# %%
torch.manual_seed(0)
tokens = ["the", "cat", "sat", "on", "the", "mat"]
attention = torch.nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True)
x = torch.randn(1, len(tokens), 8)  # (B, T, D)
with torch.no_grad():
    _, weights = attention(x, x, x, average_attn_weights=False)  # (B, H, T, T)
display(qkv.show_attention(weights[0], tokens, title="nn.MultiheadAttention, 2 heads"))
