"""The attention core: ``softmax(score(Q, K) + bias, masked) V``, in one function.

Every module in qkv that attends (multi-head attention, RNN decoders, the ViT, the captioner)
calls :func:`attend`. Masking, the softmax, dropout and the choice of kernel live here and nowhere
else.

Two paths compute the same thing:

* the **fused path** hands dot-product scores to
  :func:`torch.nn.functional.scaled_dot_product_attention` (SDPA); it is taken whenever the score is
  a dot product (:meth:`Score.as_dot_product`) and no weights are requested;
* the **chunked path** evaluates any score on blocks of queries, so the ``(B, H, chunk, Tk)``
  energies never exceed :data:`CHUNK_ELEMENTS` however long the sequences; it also returns the
  weights.

Guarantees on both paths: a query row with no allowed key gives a zero context and zero weights
(never NaN, never a uniform average) with finite gradients; the softmax runs in float32 for
float16/bfloat16 inputs and masked energies are filled with float32's own minimum, so low precision
cannot overflow; dropout applies only when ``training`` is true. Non-finite numbers: a NaN (or inf)
query row gives a NaN context row, never a plausible one; whatever sits under a key that no query
of its head may attend to (padding), NaN and inf included, never reaches an output or a gradient.
A key masked for only some queries (a causal mask) is real input: finite garbage there cannot leak,
but a non-finite value reaches, through ``0 * inf``, the rows of the same head. Only a boolean
tensor is a mask: any other dtype is an error (a 0/1 mask read as a bias would favour padding).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import forward_ad

from qkv.attention.masks import as_4d, causal_mask, check_keep, check_mask, combine_masks
from qkv.attention.scores import ScaledDot, Score, check_prepared

# Upper bound on the float32 energies of one query chunk in the chunked path: 2**23 values, 32 MiB.
CHUNK_ELEMENTS = 1 << 23

_DEFAULT_SCORE = ScaledDot()


@dataclass(frozen=True)
class AttentionOutput:
    """What attention returns.

    Attributes:
        context: ``(B, [H,] Tq, Dv)`` weighted sums of the values.
        weights: ``(B, [H,] Tq, Tk)`` attention distribution (before dropout), or ``None`` unless
            requested. Rows with no allowed key are all zero.
    """

    context: Tensor
    weights: Tensor | None = None


def attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    score: Score | None = None,
    keep: Tensor | None = None,
    bias: Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    training: bool = True,
    need_weights: bool = False,
    prepared_key: Tensor | None = None,
    overwrite_kv: bool = False,
) -> AttentionOutput:
    """Attend from ``query`` to ``key``/``value``.

    Args:
        query: ``(B, Tq, Dq)`` or ``(B, H, Tq, Dq)``.
        key: ``(B, Tk, Dk)`` or ``(B, Hkv, Tk, Dk)``; ``H`` must be a multiple of ``Hkv``
            (grouped-query attention shares each key/value head among ``H / Hkv`` query heads).
        value: ``(B, Tk, Dv)`` or ``(B, Hkv, Tk, Dv)``.
        score: a :class:`~qkv.attention.scores.Score`; defaults to :class:`ScaledDot`.
        keep: boolean keep-mask, ``True`` = may attend, broadcastable to ``(B, H, Tq, Tk)``
            (``(B, Tq, Tk)`` for 3-d inputs). Any other dtype is refused (a 0/1 integer or float
            mask read as a bias would give padding more weight): pass ``keep.bool()``, or an
            additive float bias as ``bias``.
        bias: additive float bias broadcastable like ``keep`` (ALiBi, relative positions).
        is_causal: also apply :func:`~qkv.attention.masks.causal_mask` (bottom-right aligned).
        dropout_p: dropout on the attention weights, applied only when ``training`` is true.
        training: whether dropout is active; modules pass ``self.training``.
        need_weights: also return the ``(B, [H,] Tq, Tk)`` weights (takes the chunked path).
        prepared_key: ``score.prepare(key)``, ``(B, [Hkv,] Tk, *)``, from a caller that scores the
            same keys many times (a recurrent decoder at every step); skips the per-call
            ``prepare``. ``key`` is still needed: a dot-product score uses it directly.
        overwrite_kv: ``key`` and ``value`` are the caller's scratch tensors (dense, used for
            nothing after this call), so the keys and values no query may see are zeroed in
            place rather than in copies. ``MultiHeadAttention`` passes its fresh projections so.

    Returns:
        :class:`AttentionOutput` with ``context`` of shape ``(B, [H,] Tq, Dv)``.

    Raises:
        ValueError: on inconsistent shapes, empty sequences or batches, a ``keep`` that is not
            boolean, a bias that is not floating point, or dropout outside ``[0, 1)``.
    """
    score = _DEFAULT_SCORE if score is None else score
    check_keep(keep, "keep", has_bias=True)
    if bias is not None and not bias.dtype.is_floating_point:
        raise ValueError(
            f"bias must be a floating-point tensor (added to the energies), got dtype "
            f"{bias.dtype}; a boolean keep-mask goes in keep="
        )
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")

    if not query.dtype == key.dtype == value.dtype:
        query, key, value, prepared_key = _autocast_inputs(query, key, value, prepared_key)
    shape = _check_inputs(query, key, value)  # (B, [H,] Tq, Tk)
    check_prepared(prepared_key, key)
    if keep is not None:
        check_mask(keep, shape, "keep")
    if bias is not None:
        check_mask(bias, shape, "bias")
    unbatched_heads = query.dim() == 3
    if unbatched_heads:  # (B, T, D) -> (B, 1, T, D): one code path for both layouts
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        keep, bias = _add_head_dim(keep), _add_head_dim(bias)
        prepared_key = None if prepared_key is None else prepared_key.unsqueeze(1)
    dropout_p = dropout_p if training else 0.0
    if keep is not None:  # garbage (even NaN or inf) under keys that no query may see never leaks
        key, value, prepared_key = _clear_hidden_keys(keep, key, value, prepared_key, overwrite_kv)

    dot = None if need_weights else score.as_dot_product(query, key)
    if dot is not None:
        q, k, scale = dot
        context, weights = _fused(q, k, value, scale, keep, bias, is_causal, dropout_p), None
    else:
        if is_causal:
            keep = combine_masks(keep, causal_mask(shape[-2], shape[-1], device=query.device))
        prepared = score.prepare(key) if prepared_key is None else prepared_key
        context, weights = _chunked(
            query, prepared, value, score, keep, bias, dropout_p, need_weights
        )
    if unbatched_heads:
        context = context.squeeze(1)
        weights = None if weights is None else weights.squeeze(1)
    return AttentionOutput(context, weights)


def masked_softmax(energies: Tensor, keep: Tensor | None) -> Tensor:
    """Softmax over the last dim, zero where ``keep`` is false and on empty rows.

    Args:
        energies: ``(..., Tq, Tk)`` of any float dtype; float16/bfloat16 are upcast to float32.
        keep: boolean, broadcastable to ``energies``, or ``None``.

    Returns:
        ``(..., Tq, Tk)`` in float32 (float64 for float64 input); each row sums to 1 over its
        allowed keys, or is all zero.
    """
    energies = energies.to(softmax_dtype(energies.dtype))
    if keep is None:
        return energies.softmax(dim=-1)
    energies = energies.masked_fill(~keep, torch.finfo(energies.dtype).min)
    # A row with no allowed key softmaxes to a uniform row over equal minima: zero it instead.
    return energies.softmax(dim=-1) * keep.any(dim=-1, keepdim=True)


def softmax_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the softmax runs in: at least float32."""
    return torch.promote_types(dtype, torch.float32)


def _add_head_dim(mask: Tensor | None) -> Tensor | None:
    if mask is None or mask.dim() < 3:
        return mask  # (Tq, Tk) or (Tk,) broadcast over heads anyway
    return mask.unsqueeze(-3)  # (B, Tq, Tk) -> (B, 1, Tq, Tk)


def _clear_hidden_keys(
    keep: Tensor, key: Tensor, value: Tensor, prepared_key: Tensor | None, in_place: bool = False
) -> tuple[Tensor, Tensor, Tensor | None]:
    """Zero the keys and values (and prepared keys) that no query of their head may attend to.

    A masked weight is exactly zero, but ``0 * nan`` is NaN: without this, a NaN or inf at a padded
    position would reach every output through ``weights @ value`` (and, on the fused path, through
    the energies). One pass over ``key`` and ``value``; a key that some query may see is left as it
    is (a non-finite value there is real input, and reaches the queries that may see it).

    Shapes: ``keep`` is 4-d broadcastable to ``(B, H, Tq, Tk)``; ``key``/``value`` are
    ``(B, Hkv, Tk, *)``. ``in_place``: ``key`` and ``value`` may be overwritten (never
    ``prepared_key``, which a caller keeps across calls).
    """
    keep = as_4d(keep)
    # (B|1, H|1, Tk, 1): may some query of this head see the key? A key-padding mask (one
    # broadcast query row) says so itself.
    one_row = keep.size(-2) == 1
    visible = keep.transpose(-2, -1) if one_row else keep.any(dim=-2).unsqueeze(-1)
    h, hkv = visible.size(1), key.size(1)
    if h not in (1, hkv):  # grouped heads: a key/value head is visible if any of its group sees it
        visible = visible.unflatten(1, (hkv, h // hkv)).any(dim=2)  # (B|1, Hkv, Tk, 1)
    masks: dict[object, Tensor] = {}  # the masks derived from `visible`, shared by the tensors
    key = _zero_hidden(key, visible, masks, in_place)
    value = _zero_hidden(value, visible, masks, in_place)
    if prepared_key is not None:
        prepared_key = _zero_hidden(prepared_key, visible, masks, False)
    return key, value, prepared_key


# Integer dtypes as wide as each float dtype, for _zero_hidden's bitwise AND.
_SAME_WIDTH_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _zero_hidden(
    tensor: Tensor, visible: Tensor, masks: dict[object, Tensor], in_place: bool
) -> Tensor:
    """``tensor.masked_fill(~visible, 0)``, bit for bit (``+0.0`` where hidden).

    Where no gradient is needed, on the CPU and outside ``torch.compile``, it ANDs the tensor's
    bits with an integer mask of the same width (all ones where visible, zero where hidden): a
    vectorised pass, where ``masked_fill``'s CPU kernel reads the broadcast byte mask one element
    at a time, 5 to 10 times slower at attention sizes. The AND has no derivative, so a tensor
    that needs one (reverse mode, or a forward-mode tangent) takes ``masked_fill``. ``in_place``
    (the AND only) overwrites ``tensor``: a fresh copy can cost more than the AND. ``masks``
    caches ``~visible`` and each width's integer mask for the tensors of one call.
    """
    width = tensor.element_size()
    if (
        tensor.device.type != "cpu"
        or not tensor.dtype.is_floating_point
        or width not in _SAME_WIDTH_INT
        or (tensor.requires_grad and torch.is_grad_enabled())
        or forward_ad.unpack_dual(tensor).tangent is not None
        or torch.compiler.is_compiling()
    ):
        if "hidden" not in masks:
            masks["hidden"] = ~visible
        return tensor.masked_fill(masks["hidden"], 0)
    as_int = _SAME_WIDTH_INT[width]
    if as_int not in masks:
        masks[as_int] = visible.to(as_int).neg_()  # True -> -1 (every bit set), False -> 0
    if in_place:
        tensor.view(as_int).bitwise_and_(masks[as_int])
        return tensor
    return (tensor.view(as_int) & masks[as_int]).view(tensor.dtype)


def _autocast_inputs(
    query: Tensor, key: Tensor, value: Tensor, prepared_key: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Under autocast, inputs of mixed float dtypes (a bfloat16 RNN state attending over float32
    keys, say) are cast to the autocast dtype, as autocast's own matrix products would; outside
    autocast a mixture stays an error."""
    device = query.device.type
    tensors = (query, key, value)
    if query.dtype == key.dtype == value.dtype or not torch.is_autocast_enabled(device):
        return query, key, value, prepared_key
    if not all(t.dtype.is_floating_point for t in tensors):
        return query, key, value, prepared_key  # _check_inputs names the culprit
    dtype = torch.get_autocast_dtype(device)
    cast = [t.to(dtype) for t in tensors]
    if prepared_key is not None and prepared_key.dtype.is_floating_point:
        prepared_key = prepared_key.to(dtype)
    return cast[0], cast[1], cast[2], prepared_key


def _check_inputs(query: Tensor, key: Tensor, value: Tensor) -> tuple[int, ...]:
    """Validate shapes and dtypes; return ``(B, H, Tq, Tk)``, or ``(B, Tq, Tk)`` for 3-d inputs."""
    q_shape, k_shape, v_shape = query.shape, key.shape, value.shape
    dims = len(q_shape)
    if not (dims == len(k_shape) == len(v_shape)) or dims not in (3, 4):
        raise ValueError(
            "query, key and value must all be (B, T, D) or all (B, H, T, D), got shapes "
            f"{tuple(q_shape)}, {tuple(k_shape)}, {tuple(v_shape)}"
        )
    if not (query.dtype == key.dtype == value.dtype) or not query.dtype.is_floating_point:
        raise ValueError(
            "query, key and value must share one floating-point dtype, got "
            f"{query.dtype}, {key.dtype}, {value.dtype}"
        )
    if v_shape[:-1] != k_shape[:-1]:
        raise ValueError(
            f"key {tuple(k_shape)} and value {tuple(v_shape)} must agree in batch, heads and length"
        )
    b, tq, tk = q_shape[0], q_shape[-2], k_shape[-2]
    if k_shape[0] != b:
        raise ValueError(f"query batch {b} differs from key/value batch {k_shape[0]}")
    if b == 0:
        raise ValueError(f"empty batch: query has shape {tuple(q_shape)}")
    if tq == 0 or tk == 0:
        raise ValueError(f"empty sequence: query length {tq}, key length {tk}; both must be >= 1")
    if dims == 3:
        return b, tq, tk
    h, hk = q_shape[1], k_shape[1]
    if hk == 0 or h % hk != 0:
        raise ValueError(f"query heads {h} must be a multiple of key/value heads {hk}")
    return b, h, tq, tk


def _fused(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    scale: float,
    keep: Tensor | None,
    bias: Tensor | None,
    is_causal: bool,
    dropout_p: float,
) -> Tensor:
    """SDPA with qkv's mask convention (SDPA's bool mask is also True = attend)."""
    tq, tk = query.size(-2), key.size(-2)
    sdpa_causal = is_causal and keep is None and bias is None and tq == tk
    if is_causal and not sdpa_causal:
        keep = combine_masks(keep, causal_mask(tq, tk, device=query.device))
    attn_mask: Tensor | None = keep
    if bias is not None:
        attn_mask = bias.to(query.dtype)
        if keep is not None:
            attn_mask = attn_mask.masked_fill(~keep, torch.finfo(query.dtype).min)
    # Without a mask, SDPA's CPU kernels return a zero context for a query row holding NaN or
    # inf at some sizes (short key sequences; inf in bfloat16 at 128 and 512 keys too; with a
    # mask, and on the chunked path, the row is NaN). NaN in, NaN out: a zero would look like a
    # fully masked row. On the CPU (outside torch.compile, where reading a number back is free)
    # one sum of the whole query screens it (before SDPA, which then finds it in cache); the
    # exact per-row test runs only when that sum is not finite.
    screened = attn_mask is not None or (
        query.device.type == "cpu" and not torch.compiler.is_compiling() and _sum_is_finite(query)
    )
    context = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=sdpa_causal,
        scale=scale,
        enable_gqa=query.size(1) != key.size(1),
    )  # (B, H, Tq, Dv)
    if bias is not None and keep is not None:
        # An additive mask has no "empty row"; SDPA would average such a row uniformly.
        context = context.masked_fill(~as_4d(keep).any(dim=-1, keepdim=True), 0.0)
    if not screened:
        bad = ~query.isfinite().all(dim=-1, keepdim=True)  # (B, H, Tq, 1)
        context = context.masked_fill(bad, float("nan"))
    return context


def _sum_is_finite(tensor: Tensor) -> bool:
    """Whether the sum of every entry is finite: false whenever some entry is NaN or inf, and
    when finite entries overflow the sum (a screen: false only sends the caller to an exact test).

    The sum runs in the tensor's own dtype (a float32 sum of bfloat16 would first copy the tensor
    whole, at short lengths dearer than the attention), float16 apart, whose range is small.
    """
    dtype = torch.float32 if tensor.dtype == torch.float16 else None
    return math.isfinite(tensor.detach().sum(dtype=dtype).item())


def _chunked(
    query: Tensor,
    prepared: Tensor,
    value: Tensor,
    score: Score,
    keep: Tensor | None,
    bias: Tensor | None,
    dropout_p: float,
    need_weights: bool,
) -> tuple[Tensor, Tensor | None]:
    """Any score, queries in chunks; peak temporaries bounded by :data:`CHUNK_ELEMENTS`.

    ``prepared`` is ``score.prepare(key)`` (e.g. Additive's ``U k``), computed once for every
    chunk: ``(B, Hkv, Tk, *)``.
    """
    b, h, tq, _ = query.shape
    groups = h // prepared.size(1)
    if groups > 1:  # grouped-query attention: share each key/value head among `groups` heads
        prepared = prepared.repeat_interleave(groups, dim=1)  # (B, H, Tk, *)
        value = value.repeat_interleave(groups, dim=1)  # (B, H, Tk, Dv)
    tk = prepared.size(-2)
    keep = None if keep is None else as_4d(keep)
    bias = None if bias is None else as_4d(bias)
    chunk = max(1, CHUNK_ELEMENTS // (b * h * tk))
    contexts, weights = [], []
    for start in range(0, tq, chunk):
        rows = slice(start, start + chunk)
        energies = score.energies(query[:, :, rows], prepared)  # (B, H, c, Tk)
        if bias is not None:
            energies = energies.to(softmax_dtype(energies.dtype)) + _rows(bias, rows)
        probs = masked_softmax(energies, None if keep is None else _rows(keep, rows))  # >= float32
        if need_weights:
            weights.append(probs.to(query.dtype))
        if dropout_p:
            probs = F.dropout(probs, dropout_p)
        contexts.append(probs.to(value.dtype) @ value)  # (B, H, c, Dv)
    context = torch.cat(contexts, dim=-2) if len(contexts) > 1 else contexts[0]
    if not need_weights:
        return context, None
    return context, torch.cat(weights, dim=-2) if len(weights) > 1 else weights[0]


def _rows(mask: Tensor, rows: slice) -> Tensor:
    """The query rows of a 4-d mask or bias, respecting a broadcast (size-1) query dim."""
    return mask if mask.size(-2) == 1 else mask[..., rows, :]
