"""Multi-head attention, Vaswani et al. 2017, section 3.2.2:

    MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

with separate key and value head widths (``d_k``, ``d_v``), grouped-query attention (Ainslie et al.
2023: ``num_kv_heads`` key/value heads shared by ``num_heads`` query heads; 1 gives multi-query
attention, Shazeer 2019) and an explicit :class:`~qkv.attention.kv_cache.KVCache`.

    query (B, Tq, D)   --q_proj--> (B, H, Tq, Dk)   --+
    key   (B, Tk, kdim) --k_proj--> (B, Hkv, Tk, Dk) --+--attend()--> (B, H, Tq, Dv)
    value (B, Tk, vdim) --v_proj--> (B, Hkv, Tk, Dv) --+                  |
                                                     (B, Tq, D) <--out_proj--+

The module only projects and reshapes; masking, the softmax, dropout and the kernel are
:func:`qkv.attention.core.attend`'s.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from qkv.attention.core import AttentionOutput, attend
from qkv.attention.kv_cache import KVCache
from qkv.attention.rotary import RotaryEmbedding


class MultiHeadAttention(nn.Module):
    """Multi-head self- or cross-attention, batch-first.

    Args:
        d_model: width ``D`` of queries and of the output.
        num_heads: query heads ``H``.
        d_k: per-head query/key width; defaults to ``d_model // num_heads``.
        d_v: per-head value width; defaults to ``d_k``.
        num_kv_heads: key/value heads ``Hkv`` (a divisor of ``H``); defaults to ``H``.
        bias: biases on the four projections.
        dropout: dropout on the attention weights, active only in training mode.
        kdim: width of the key input for cross-attention; default ``d_model``.
        vdim: width of the value input for cross-attention; default ``d_model``.
        rotary: rotary position embedding applied to queries and keys (RoPE), or ``None``.

    Shape:
        query ``(B, Tq, D)``; key ``(B, Tk, kdim)``; value ``(B, Tk, vdim)``; keep broadcastable to
        ``(B, H, Tq, Tk)`` (``Tk`` counts cached positions too); output context ``(B, Tq, D)`` and
        per-head weights ``(B, H, Tq, Tk)`` when requested.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        d_k: int | None = None,
        d_v: int | None = None,
        num_kv_heads: int | None = None,
        bias: bool = True,
        dropout: float = 0.0,
        kdim: int | None = None,
        vdim: int | None = None,
        rotary: RotaryEmbedding | None = None,
    ) -> None:
        super().__init__()
        if d_model <= 0 or num_heads <= 0:
            raise ValueError(
                f"d_model and num_heads must be positive, got {d_model} and {num_heads}"
            )
        if d_k is None and d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}; "
                "choose other sizes or pass d_k explicitly"
            )
        d_k = d_model // num_heads if d_k is None else d_k
        d_v = d_k if d_v is None else d_v
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if d_k <= 0 or d_v <= 0:
            raise ValueError(f"d_k and d_v must be positive, got d_k={d_k}, d_v={d_v}")
        if num_kv_heads <= 0 or num_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_heads={num_heads} must be a multiple of num_kv_heads={num_kv_heads}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.d_k, self.d_v, self.dropout = d_k, d_v, dropout
        self.kdim = d_model if kdim is None else kdim
        self.vdim = d_model if vdim is None else vdim
        self.q_proj = nn.Linear(d_model, num_heads * d_k, bias=bias)
        self.k_proj = nn.Linear(self.kdim, num_kv_heads * d_k, bias=bias)
        self.v_proj = nn.Linear(self.vdim, num_kv_heads * d_v, bias=bias)
        self.out_proj = nn.Linear(num_heads * d_v, d_model, bias=bias)
        self.rotary = rotary

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        keep: Tensor | None = None,
        bias: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
        cache: KVCache | None = None,
        positions: Tensor | None = None,
    ) -> AttentionOutput:
        """Attend from ``query`` to ``key``/``value`` (self-attention when ``key`` is ``None``).

        Args:
            query: ``(B, Tq, D)``.
            key: ``(B, Tk, kdim)``; ``None`` for self-attention, or to use a static ``cache``.
            value: ``(B, Tk, vdim)``; defaults to ``key``.
            keep: boolean keep-mask (``True`` = may attend) broadcastable to ``(B, H, Tq, Tk)``.
            bias: additive float bias broadcastable to ``(B, H, Tq, Tk)`` (e.g. ALiBi).
            is_causal: add a bottom-right causal mask (correct for new queries after a cache).
            need_weights: return the per-head weights ``(B, H, Tq, Tk)``.
            cache: a growing :class:`KVCache` receives this call's keys and values and supplies
                the earlier ones; a static cache supplies fixed keys and values.
            positions: integer positions ``(Tq,)`` or ``(B, Tq)`` for the rotary embedding;
                default: ``cache.length + arange(Tq)``.

        Returns:
            :class:`AttentionOutput` with ``context (B, Tq, D)``.
        """
        self._check(query, key, value, cache)
        b, tq, _ = query.shape
        q = (
            self.q_proj(query).view(b, tq, self.num_heads, self.d_k).transpose(1, 2)
        )  # (B, H, Tq, Dk)
        offset = 0 if cache is None else cache.length
        if cache is not None and cache.is_static:
            k, v = cache.key, cache.value  # (B, Hkv, S, Dk), (B, Hkv, S, Dv)
        else:
            k, v = self.project_kv(query if key is None else key, value)
            if self.rotary is not None:
                k = self.rotary(k, self._positions(positions, offset, k.size(2), query.device))
            if cache is not None:
                k, v = cache.update(k, v)
        if self.rotary is not None:
            q = self.rotary(q, self._positions(positions, offset, tq, query.device))
        out = attend(
            q,
            k,
            v,
            keep=keep,
            bias=bias,
            is_causal=is_causal,
            dropout_p=self.dropout,
            training=self.training,
            need_weights=need_weights,
            overwrite_kv=cache is None,  # fresh projections, not a cache's buffers
        )
        context = out.context.transpose(1, 2).reshape(
            b, tq, self.num_heads * self.d_v
        )  # (B, Tq, H*Dv)
        return AttentionOutput(self.out_proj(context), out.weights)

    def project_kv(self, key: Tensor, value: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Project keys and values into heads: ``(B, Tk, *) -> (B, Hkv, Tk, Dk), (B, Hkv, Tk, Dv)``.

        Use with :meth:`KVCache.static` to project an encoder's states once for every decoder step.
        """
        value = key if value is None else value
        b, tk, _ = key.shape
        k = self.k_proj(key).view(b, tk, self.num_kv_heads, self.d_k).transpose(1, 2)
        v = self.v_proj(value).view(b, tk, self.num_kv_heads, self.d_v).transpose(1, 2)
        return k, v  # (B, Hkv, Tk, Dk), (B, Hkv, Tk, Dv)

    def new_cache(
        self, batch: int, max_len: int | None = None, *, dtype: torch.dtype | None = None
    ) -> KVCache:
        """An empty growing cache sized for this module's key/value heads."""
        weight = self.k_proj.weight
        return KVCache.empty(
            batch,
            self.num_kv_heads,
            self.d_k,
            self.d_v,
            max_len=max_len,
            dtype=weight.dtype if dtype is None else dtype,
            device=weight.device,
        )

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy a :class:`torch.nn.MultiheadAttention` exactly (weights, biases, dropout).

        qkv is always batch-first; a module built with ``batch_first=False`` takes ``(T, B, D)``
        inputs, so transpose them before calling the copy. ``add_bias_kv`` and ``add_zero_attn``
        have no equivalent here and raise ``ValueError``.
        """
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("from_torch does not support add_bias_kv=True or add_zero_attn=True")
        has_bias = module.in_proj_bias is not None
        if has_bias != (module.out_proj.bias is not None):
            raise ValueError("from_torch needs biases on all projections or on none")
        new = cls(
            module.embed_dim,
            module.num_heads,
            bias=has_bias,
            dropout=module.dropout,
            kdim=module.kdim,
            vdim=module.vdim,
        ).to(device=module.out_proj.weight.device, dtype=module.out_proj.weight.dtype)
        d = module.embed_dim
        if module._qkv_same_embed_dim:
            weights = module.in_proj_weight.split(d, dim=0)
        else:
            weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
        biases = module.in_proj_bias.split(d) if has_bias else (None, None, None)
        with torch.no_grad():
            for proj, weight, b in zip(
                (new.q_proj, new.k_proj, new.v_proj), weights, biases, strict=True
            ):
                proj.weight.copy_(weight)
                if b is not None:
                    proj.bias.copy_(b)
            new.out_proj.weight.copy_(module.out_proj.weight)
            if has_bias:
                new.out_proj.bias.copy_(module.out_proj.bias)
        return new.train(module.training)

    def _check(
        self, query: Tensor, key: Tensor | None, value: Tensor | None, cache: KVCache | None
    ) -> None:
        if query.dim() != 3 or query.size(-1) != self.d_model:
            raise ValueError(
                f"query must be (B, Tq, d_model={self.d_model}), got {tuple(query.shape)}"
            )
        if self.rotary is not None and (key is not None or (cache is not None and cache.is_static)):
            raise ValueError(
                "rotary embeddings apply to self-attention only; got key or a static cache"
            )
        if cache is not None and cache.is_static and key is not None:
            raise ValueError("pass either key/value or a static cache, not both")
        if key is None and value is not None:
            raise ValueError("value given without key")
        if key is not None:
            if key.dim() != 3 or key.size(-1) != self.kdim or key.size(0) != query.size(0):
                raise ValueError(
                    f"key must be (B={query.size(0)}, Tk, kdim={self.kdim}), got {tuple(key.shape)}"
                )
            if value is not None and (
                value.dim() != 3 or value.size(-1) != self.vdim or value.shape[:2] != key.shape[:2]
            ):
                raise ValueError(
                    f"value must be (B={key.size(0)}, Tk={key.size(1)}, vdim={self.vdim}), "
                    f"got {tuple(value.shape)}"
                )
        elif (cache is None or not cache.is_static) and (
            self.kdim != self.d_model or self.vdim != self.d_model
        ):
            raise ValueError(
                f"self-attention needs kdim == vdim == d_model, got kdim={self.kdim}, "
                f"vdim={self.vdim}, d_model={self.d_model}"
            )

    @staticmethod
    def _positions(
        positions: Tensor | None, offset: int, length: int, device: torch.device
    ) -> Tensor:
        if positions is not None:
            return positions
        return torch.arange(offset, offset + length, device=device)  # (T,)

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads}, d_k={self.d_k}, d_v={self.d_v}, "
            f"dropout={self.dropout}"
        )
