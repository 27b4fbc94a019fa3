"""The implementations the attention benchmark compares, all with one set of weights copied from
one ``torch.nn.MultiheadAttention`` (d_model 512, 8 heads of 64): qkv's ``MultiHeadAttention``,
PyTorch's, the naive textbook implementation and the floor (the same projections around a bare
``F.scaled_dot_product_attention``); and qkv's additive (Bahdanau) score against its naive
broadcast form. Each is a :class:`Runner` over one configuration's :class:`Inputs`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import harness  # noqa: F401  (puts src/ on sys.path for qkv)
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import qkv.attention as qa

D_MODEL, HEADS = 512, 8
HEAD_DIM = D_MODEL // HEADS
IMPLS = ("qkv", "torch", "naive", "floor")
IMPL_NAMES = {
    "qkv": "qkv MHA",
    "torch": "torch MHA",
    "naive": "naive",
    "floor": "floor (SDPA)",
}
MASKS = ("none", "causal", "padding")
MODES = ("fwd", "fwdbwd")
MODE_NAMES = {"fwd": "fwd", "fwdbwd": "fwd+bwd"}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class _Projections(nn.Module):
    """The four projections of a ``torch.nn.MultiheadAttention``, as plain parameters."""

    def __init__(self, mha: nn.MultiheadAttention) -> None:
        super().__init__()
        wq, wk, wv = mha.in_proj_weight.detach().clone().chunk(3)
        bq, bk, bv = mha.in_proj_bias.detach().clone().chunk(3)
        self.wq, self.wk, self.wv = nn.Parameter(wq), nn.Parameter(wk), nn.Parameter(wv)
        self.bq, self.bk, self.bv = nn.Parameter(bq), nn.Parameter(bk), nn.Parameter(bv)
        self.wo = nn.Parameter(mha.out_proj.weight.detach().clone())
        self.bo = nn.Parameter(mha.out_proj.bias.detach().clone())

    def heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, t, _ = x.shape

        def split(y: Tensor) -> Tensor:
            return y.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)  # (B, H, T, dh)

        q = split(F.linear(x, self.wq, self.bq))
        k = split(F.linear(x, self.wk, self.bk))
        v = split(F.linear(x, self.wv, self.bv))
        return q, k, v

    def out(self, context: Tensor) -> Tensor:
        b, _, t, _ = context.shape
        return F.linear(context.transpose(1, 2).reshape(b, t, D_MODEL), self.wo, self.bo)


class Naive(_Projections):
    """The textbook implementation (the practice qkv replaces): full scores, -1e10 fill."""

    def forward(self, x: Tensor, keep: Tensor | None, need_weights: bool = False):
        q, k, v = self.heads(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, T)
        if keep is not None:
            scores = scores.masked_fill(~keep, -1e10)
        weights = scores.softmax(dim=-1)
        return self.out(weights @ v), (weights if need_weights else None)


class Floor(_Projections):
    """The same projections around a bare ``F.scaled_dot_product_attention``."""

    def forward(self, x: Tensor, keep: Tensor | None, is_causal: bool):
        q, k, v = self.heads(x)
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=is_causal)
        return self.out(context), None


@dataclass
class Inputs:
    """One configuration's inputs, shared by every implementation."""

    x: Tensor | None = None  # (B, T, D) self-attention input
    mask: str = "none"
    keep: Tensor | None = None  # qkv / SDPA keep-mask (B, 1, 1, T) for padding
    keep_naive: Tensor | None = None  # naive: (T, T) causal or (B, 1, 1, T) padding keep-mask
    key_padding: Tensor | None = None  # torch MHA: (B, T), True = ignore
    torch_causal: Tensor | None = None  # torch MHA: (T, T), True = masked
    q: Tensor | None = None  # additive score query (B, Tq, Dq)
    k: Tensor | None = None  # additive score key (B, Tk, Dk)

    @property
    def causal(self) -> bool:
        return self.mask == "causal"

    def leaves(self) -> list[Tensor]:
        return [t for t in (self.x, self.q, self.k) if t is not None]

    def nbytes(self) -> int:
        tensors = (self.x, self.keep, self.keep_naive, self.key_padding, self.torch_causal)
        return sum(
            t.numel() * t.element_size() for t in (*tensors, self.q, self.k) if t is not None
        )


def mha_inputs(batch: int, length: int, dtype: torch.dtype, mask: str, seed: int = 1) -> Inputs:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, D_MODEL, generator=gen).to(dtype).requires_grad_()
    inputs = Inputs(x=x, mask=mask)
    if mask == "causal":
        tril = torch.ones(length, length, dtype=torch.bool).tril()
        inputs.keep_naive, inputs.torch_causal = tril, ~tril
    elif mask == "padding":
        lengths = torch.full((batch,), length * 3 // 4)  # the last quarter of each row is padding
        keep = qa.padding_mask(lengths, length)  # (B, 1, 1, T)
        inputs.keep = inputs.keep_naive = keep
        inputs.key_padding = ~keep[:, 0, 0, :]
    elif mask != "none":
        raise ValueError(f"unknown mask kind {mask!r}")
    return inputs


def additive_inputs(batch: int, length: int, dim: int, seed: int = 1) -> Inputs:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, length, dim, generator=gen).requires_grad_()
    k = torch.randn(batch, length, dim, generator=gen).requires_grad_()
    return Inputs(q=q, k=k)


def base_mha(dtype: torch.dtype = torch.float32, seed: int = 0) -> nn.MultiheadAttention:
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True)
    nn.init.normal_(mha.in_proj_bias, std=0.02)  # non-zero biases, so they are checked too
    nn.init.normal_(mha.out_proj.bias, std=0.02)
    return mha.to(dtype).eval()


Impl = Callable[[Inputs], tuple[Tensor, Tensor | None]]


@dataclass
class Runner:
    """An implementation: ``fn(inputs) -> (output, weights or None)`` and its parameters."""

    fn: Impl
    params: list[nn.Parameter] = field(default_factory=list)

    def __call__(self, inputs: Inputs, mode: str) -> object:
        if mode == "fwd":
            with torch.no_grad():
                return self.fn(inputs)
        for tensor in (*self.params, *inputs.leaves()):
            tensor.grad = None
        out, _ = self.fn(inputs)
        out.sum().backward()
        return None


def mha_runners(mha: nn.MultiheadAttention) -> dict[str, Runner]:
    """All implementations, with weights copied from ``mha`` (already in the wanted dtype)."""
    torch_mha = copy.deepcopy(mha).eval()
    ours = qa.MultiHeadAttention.from_torch(mha).eval()
    naive, floor = Naive(mha).eval(), Floor(mha).eval()

    def run_qkv(i: Inputs):
        return ours(i.x, keep=i.keep, is_causal=i.causal).context, None

    def run_qkv_weights(i: Inputs):
        out = ours(i.x, keep=i.keep, is_causal=i.causal, need_weights=True)
        return out.context, out.weights

    def run_torch(i: Inputs):
        out, _ = torch_mha(
            i.x,
            i.x,
            i.x,
            key_padding_mask=i.key_padding,
            attn_mask=i.torch_causal,
            is_causal=i.causal,
            need_weights=False,
        )
        return out, None

    def run_naive(i: Inputs):
        return naive(i.x, i.keep_naive)

    def run_naive_weights(i: Inputs):
        return naive(i.x, i.keep_naive, need_weights=True)

    def run_floor(i: Inputs):
        return floor(i.x, i.keep, i.causal)

    return {
        "qkv": Runner(run_qkv, list(ours.parameters())),
        "torch": Runner(run_torch, list(torch_mha.parameters())),
        "naive": Runner(run_naive, list(naive.parameters())),
        "floor": Runner(run_floor, list(floor.parameters())),
        "qkv-weights": Runner(run_qkv_weights, list(ours.parameters())),
        "naive-weights": Runner(run_naive_weights, list(naive.parameters())),
    }


def additive_runners(dim: int, hidden: int, seed: int = 0) -> dict[str, Runner]:
    torch.manual_seed(seed)
    ours = qa.Additive(dim, dim, hidden)
    ref = copy.deepcopy(ours)

    def run_qkv(i: Inputs):
        return ours(i.q, i.k), None

    def run_naive(i: Inputs):  # v(tanh(W q[:, :, None] + U k[:, None])).squeeze(-1)
        return ref.v(
            torch.tanh(ref.query_proj(i.q[:, :, None]) + ref.key_proj(i.k[:, None]))
        ).squeeze(-1), None

    return {
        "additive-qkv": Runner(run_qkv, list(ours.parameters())),
        "additive-naive": Runner(run_naive, list(ref.parameters())),
    }


def naive_peak_bytes(batch: int, length: int, dtype: torch.dtype, mode: str, mask: str) -> int:
    """A generous estimate of the naive implementation's peak: a few (B, H, T, T) tensors."""
    scores = batch * HEADS * length * length * torch.finfo(dtype).bits // 8
    copies = (2 if mode == "fwd" else 4) + (mask != "none")
    return copies * scores
