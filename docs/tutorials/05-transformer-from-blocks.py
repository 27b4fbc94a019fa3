# %% [markdown]
# # A Transformer from qkv's blocks
#
# In the manner of the Annotated Transformer (Rush 2018), this tutorial goes from the attention
# equation to a trained encoder-decoder: the mask convention, scaled dot-product attention by
# hand (checked against `qkv.attend` and PyTorch's `scaled_dot_product_attention`), multi-head
# attention (checked against `torch.nn.MultiheadAttention`), then a small Transformer assembled
# from `qkv.layers`, trained with a plain PyTorch loop on a toy task, decoded greedily, and the
# attention of each of its heads drawn.
#
# The paper is Vaswani et al. 2017, "Attention Is All You Need"; section numbers below are its.
#
# **Budget.** A few minutes on a 2-core CPU. One switch sets every budget: the environment
# variable `QKV_TUTORIAL_MODE` (`full`, the default, or `smoke`: a few steps, the same code,
# which the tests run).

# %%
import io
import math
import os

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from IPython.display import Image, display
from torch import nn

import qkv
from qkv.layers.positional import SinusoidalPositionalEncoding
from qkv.layers.transformer import TransformerDecoder, TransformerEncoder
from qkv.viz.heatmap import heads_figure

MODE = os.environ.get("QKV_TUTORIAL_MODE", "full")
if MODE not in ("full", "smoke"):
    raise ValueError(f"QKV_TUTORIAL_MODE must be full or smoke, got {MODE!r}")


def budget(full, smoke):
    """The full run's value, or the smoke run's."""
    return full if MODE == "full" else smoke


def show(figure):
    """Display a matplotlib ``Figure`` that was made without pyplot (as qkv.viz makes them,
    so that nothing is drawn until asked): ``display(figure)`` would show only its repr."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
    display(Image(buffer.getvalue()))


plt.rcParams["figure.dpi"] = 80
_ = torch.manual_seed(0)  # one seed for the whole notebook

# %% [markdown]
# ## Masks: `True` means "may attend"
#
# Two masks appear in a Transformer: the **padding mask**, which hides the padding at the end of
# shorter sequences in a batch, and the **causal mask** of the decoder's self-attention, which
# hides the future (section 3.2.3: position `i` may use positions `<= i` only, so that training
# on a whole target at once is the same as generating it word by word).
#
# qkv has one convention, written in `qkv.attention.masks`: a mask is a boolean tensor where
# **`True` means the query may attend to that key**, broadcastable to `(B, H, Tq, Tk)`. It is the
# convention of `torch.nn.functional.scaled_dot_product_attention`'s boolean `attn_mask`, and the
# opposite of `torch.nn.MultiheadAttention`'s `key_padding_mask` (`True` = ignore), which
# `qkv.from_key_padding` converts. Below: two sequences of lengths 3 and 5, padded to 5, and the
# causal mask of 4 positions.

# %%
lengths = torch.tensor([3, 5])
keep = qkv.padding_mask(lengths, 5)  # (B, 1, 1, S): True at the first lengths[b] keys
print("padding_mask(lengths=[3, 5], 5), shape", tuple(keep.shape))
print(keep[:, 0, 0].int())
print("causal_mask(4): row i may attend to keys 0..i")
print(qkv.causal_mask(4).int())
torch_style = torch.tensor([[False, False, False, True, True], [False] * 5])  # True = ignore
assert torch.equal(qkv.from_key_padding(torch_style), keep)
print("both together, the first sequence (what its decoder would use on itself):")
print(qkv.combine_masks(keep, qkv.causal_mask(5))[0, 0].int())

# %% [markdown]
# ## Scaled dot-product attention, by hand
#
# Section 3.2.1, equation (1):
#
# `Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V`
#
# Masked keys get an energy of minus infinity before the softmax, so they get weight 0. Below
# it is written out for a batch of 2 with 4 heads, then compared with qkv's attention core,
# `qkv.attend` (the one function every qkv model attends through), and with PyTorch's fused
# `scaled_dot_product_attention`, which takes the same boolean mask.

# %%
B, H, T, S, Dh = 2, 4, 5, 5, 8
q, k, v = torch.randn(B, H, T, Dh), torch.randn(B, H, S, Dh), torch.randn(B, H, S, Dh)

energies = q @ k.transpose(-2, -1) / math.sqrt(Dh)  # (B, H, T, S)
energies = energies.masked_fill(~keep, float("-inf"))  # padding keys: -inf, weight 0
weights = energies.softmax(dim=-1)  # (B, H, T, S), each row sums to 1
by_hand = weights @ v  # (B, H, T, Dh)

ours = qkv.attend(q, k, v, keep=keep, need_weights=True)
torchs = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
torch.testing.assert_close(ours.context, by_hand)
torch.testing.assert_close(ours.weights, weights)
torch.testing.assert_close(torchs, by_hand)
print("by hand == qkv.attend == torch's scaled_dot_product_attention")
print("weights of the first sequence, head 0 (its keys 3 and 4 are padding):")
print(ours.weights[0, 0].numpy().round(2))

# %% [markdown]
# ## Multi-head attention
#
# Section 3.2.2: rather than one attention over `d_model`-wide vectors, project queries, keys and
# values `H` times into `d_k = d_model / H` dimensions, attend in each head in parallel, and
# concatenate: `MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O`, `head_i =
# Attention(Q W_i^Q, K W_i^K, V W_i^V)`. qkv's `MultiHeadAttention` does the projections and
# calls `qkv.attend`; `MultiHeadAttention.from_torch` copies the weights of a
# `torch.nn.MultiheadAttention`, so the two can be compared on the same input (torch's
# `key_padding_mask` is `True` = ignore: the opposite of qkv's `keep`).

# %%
d_model, heads = 32, 4
reference = nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
ours_mha = qkv.MultiHeadAttention.from_torch(reference).eval()
x = torch.randn(B, S, d_model)  # (B, S, D)
with torch.no_grad():
    expected, _ = reference(x, x, x, key_padding_mask=~keep[:, 0, 0])
    got = ours_mha(x, keep=keep, need_weights=True)
torch.testing.assert_close(got.context, expected)
print("qkv.MultiHeadAttention == torch.nn.MultiheadAttention;",
      "per-head weights", tuple(got.weights.shape), "(B, H, T, S)")  # fmt: skip

# %% [markdown]
# ## The model, assembled from `qkv.layers`
#
# Figure 1 of the paper, in the Annotated Transformer's five parts:
#
# * **embeddings** scaled by `sqrt(d_model)` (section 3.4), shared between source and target
#   here since both use the same symbols;
# * **positional encoding**, the fixed sines and cosines of section 3.5
#   (`SinusoidalPositionalEncoding`), added to the embeddings;
# * the **encoder**: `N` layers of self-attention and a feed-forward network, each in a residual
#   block with layer normalisation (`TransformerEncoder`);
# * the **decoder**: `N` layers of causal self-attention, cross-attention over the encoder's
#   output and a feed-forward network (`TransformerDecoder`);
# * the **generator**: a linear map to the vocabulary, then a softmax.
#
# `TransformerEncoder` and `TransformerDecoder` are the blocks qkv's own `transformer` model
# family is built from (`qkv.models`); the masks are the ones above.

# %%
PAD, BOS, EOS = 0, 1, 2  # special symbols; 3 .. VOCAB - 1 are the task's symbols
VOCAB = 13


class Transformer(nn.Module):
    def __init__(self, vocab, d_model=64, heads=4, layers=2, d_ff=128, dropout=0.0):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD)
        self.position = SinusoidalPositionalEncoding(d_model, dropout=dropout)
        self.encoder = TransformerEncoder(layers, d_model, heads, d_ff, dropout=dropout)
        self.decoder = TransformerDecoder(layers, d_model, heads, d_ff, dropout=dropout)
        self.generator = nn.Linear(d_model, vocab)

    def embedded(self, ids):  # (B, T) -> (B, T, D)
        return self.position(self.embed(ids) * math.sqrt(self.d_model))

    def encode(self, src, src_keep, need_weights=False):  # memory (B, S, D)
        return self.encoder(self.embedded(src), keep=src_keep, need_weights=need_weights)

    def decode(self, tgt_in, memory, src_keep, need_weights=False):  # logits (B, T, V)
        out = self.decoder(self.embedded(tgt_in), memory, memory_keep=src_keep,
                           need_weights=need_weights)  # fmt: skip
        return self.generator(out.hidden), out

    def forward(self, src, src_lengths, tgt_in):
        src_keep = qkv.padding_mask(src_lengths, src.size(1))  # (B, 1, 1, S)
        memory = self.encode(src, src_keep).hidden
        return self.decode(tgt_in, memory, src_keep)[0]


model = Transformer(VOCAB)
print(model.encoder.layers[0])
print(f"{sum(p.numel() for p in model.parameters()):,} parameters")

# %% [markdown]
# ## A toy task: reverse a sequence
#
# The Annotated Transformer's first example copies random symbols; this one **reverses** them
# (Sockeye's learning test), which is a little harder (the output's first symbol is the input's
# last) and gives a recognisable picture: the cross-attention should become the anti-diagonal.
# Sequences have 4 to 10 symbols, so every batch holds padding and the padding mask matters.
# The target fed to the decoder is `<s>` followed by the reversed sequence (teacher forcing,
# section 5.2's "shifted right"); the loss is cross-entropy on the reversed sequence followed
# by `</s>`, ignoring padding.


# %%
def batch(size, low=4, high=10):
    """Random sequences and their reversal: src (B, S), lengths (B,), tgt_in and tgt_out (B, T)."""
    lengths = torch.randint(low, high + 1, (size,))
    src = torch.full((size, high), PAD)
    tgt_in = torch.full((size, high + 1), PAD)
    tgt_out = torch.full((size, high + 1), PAD)
    for row, n in enumerate(lengths.tolist()):
        symbols = torch.randint(3, VOCAB, (n,))
        src[row, :n] = symbols
        tgt_in[row, 0], tgt_in[row, 1 : n + 1] = BOS, symbols.flip(0)
        tgt_out[row, :n], tgt_out[row, n] = symbols.flip(0), EOS
    return src, lengths, tgt_in, tgt_out


steps, warmup = budget(2000, 3), budget(100, 1)
optimiser = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.98))  # section 5.3's betas
# a linear warm-up, then a constant rate (the paper decays it too; a short run does not need to)
schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / warmup))
losses = []
model.train()
for step in range(steps):
    src, src_lengths, tgt_in, tgt_out = batch(64)
    logits = model(src, src_lengths, tgt_in)  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
    optimiser.zero_grad()
    loss.backward()
    optimiser.step()
    schedule.step()
    losses.append(loss.item())
    if step % 200 == 0 or step == steps - 1:
        print(f"step {step:4d}  loss {loss.item():.3f}")

figure, ax = plt.subplots(figsize=(5, 3))
ax.semilogy(losses)
ax.set_xlabel("step")
ax.set_ylabel("training loss")
plt.show()

# %% [markdown]
# ## Greedy decoding
#
# Generate one symbol at a time: encode the source once, start the target with `<s>`, run the
# decoder on everything generated so far, append the most likely next symbol, stop at `</s>`.
# (qkv's own decoders, `qkv.decoding`, cache the keys and values of earlier steps instead of
# recomputing them; this is the Annotated Transformer's `greedy_decode`, simple and quadratic.)
# Exact match is the fraction of held-out sequences reversed without a single mistake.


# %%
@torch.no_grad()
def greedy_decode(model, src, src_lengths, max_len):
    model.eval()
    src_keep = qkv.padding_mask(src_lengths, src.size(1))
    memory = model.encode(src, src_keep).hidden  # (B, S, D)
    out = torch.full((src.size(0), 1), BOS)  # (B, 1)
    for _ in range(max_len):
        logits, _ = model.decode(out, memory, src_keep)  # (B, t, V)
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return out[:, 1:]  # (B, max_len), generated symbols


src, src_lengths, _, tgt_out = batch(500)
decoded = greedy_decode(model, src, src_lengths, tgt_out.size(1))
right = [decoded[i, : n + 1].tolist() == tgt_out[i, : n + 1].tolist()
         for i, n in enumerate(src_lengths.tolist())]  # fmt: skip
exact = sum(right) / len(right)
print(f"exact match on {len(right)} new sequences: {exact:.1%}")
names = ["<pad>", "<s>", "</s>", *"abcdefghij"]


def words(ids):
    return [names[i] for i in ids]


for i in range(3):
    n = int(src_lengths[i])
    print(" ".join(words(src[i, :n].tolist())), "->",
          " ".join(words(decoded[i, : n + 1].tolist())))  # fmt: skip
if MODE == "full":
    assert exact > 0.8, "the model did not learn to reverse"

# %% [markdown]
# ## What each head attends to
#
# Run the trained model once more on one example with `need_weights=True`: the encoder returns
# one `(B, H, S, S)` self-attention per layer, the decoder one `(B, H, T, T)` self-attention and
# one `(B, H, T, S)` cross-attention per layer. `qkv.viz.heatmap.heads_figure` draws a layer's
# heads side by side.
#
# What to look for: in the last decoder layer's **cross-attention**, at least one head should
# draw the anti-diagonal (output position `t` reads source position `n - 1 - t`), the alignment
# the task needs; other heads may spread out or attend to neighbours, since the residual stream
# can combine what several heads found. In the **encoder's** self-attention, heads often attend
# by position (the previous or the next symbol) rather than by content: the encoder only needs to
# tell the decoder which symbol is where. The decoder's self-attention is lower-triangular: the
# causal mask at work. Which head learns what differs from seed to seed.

# %%
example = torch.tensor([[3, 4, 5, 6, 7, 8, 9, 10]])  # a b c d e f g h
example_lengths = torch.tensor([example.size(1)])
reversed_ = greedy_decode(model, example, example_lengths, example.size(1) + 1)
tgt_in = torch.cat([torch.tensor([[BOS]]), reversed_[:, :-1]], dim=1)  # <s> + output
model.eval()
with torch.no_grad():
    src_keep = qkv.padding_mask(example_lengths, example.size(1))
    encoded = model.encode(example, src_keep, need_weights=True)
    _, decoded_out = model.decode(tgt_in, encoded.hidden, src_keep, need_weights=True)
source_words = words(example[0].tolist())
output_words = words(reversed_[0].tolist())
read_words = words(tgt_in[0].tolist())
print("source:", " ".join(source_words), "  output:", " ".join(output_words))

layer = len(decoded_out.cross_weights) - 1
show(heads_figure(decoded_out.cross_weights[layer][0], source_words, output_words,
                     title=f"decoder layer {layer}: cross-attention per head"))  # fmt: skip
show(heads_figure(encoded.self_weights[0][0], source_words, source_words,
                     title="encoder layer 0: self-attention per head"))  # fmt: skip
show(heads_figure(decoded_out.self_weights[layer][0], read_words, read_words,
                     title=f"decoder layer {layer}: causal self-attention per head"))  # fmt: skip

# %% [markdown]
# The same weights in qkv's interactive view (`qkv.show_attention`): pick the layer and the head
# with the selectors. This is what a runner's `views` shows for qkv's own trained models.

# %%
cross = [layer_weights[0] for layer_weights in decoded_out.cross_weights]  # (H, T, S) per layer
display(qkv.show_attention(cross, output_words, source_words, title="cross-attention"))
