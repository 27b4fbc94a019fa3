"""Attention masks: the one convention used everywhere in qkv.

A mask is a boolean tensor where ``True`` means *may attend*. It is broadcastable to
``(B, H, Tq, Tk)`` and is built only by the helpers below; modules name it ``keep``.

Causal masks are aligned bottom-right: the last query sees every key. This is the alignment a
block of new queries at the end of a cached key sequence needs (FlashAttention >= 2.1 uses it too;
``torch.nn.functional.scaled_dot_product_attention(is_causal=True)`` is top-left aligned, which is
the same only when ``Tq == Tk``).
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(lengths: Tensor, max_len: int | None = None) -> Tensor:
    """Key-padding mask from sequence lengths.

    Args:
        lengths: ``(B,)`` integer lengths, each in ``[0, max_len]``.
        max_len: padded length ``S``; defaults to ``lengths.max()``.

    Returns:
        ``(B, 1, 1, S)`` boolean, ``True`` at the first ``lengths[b]`` positions of row ``b``.
    """
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-d (B,), got shape {tuple(lengths.shape)}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be an integer tensor, got dtype {lengths.dtype}")
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    # The range check reads values back from the tensor: under torch.compile it would break the
    # graph every call, so compiled code (fed by qkv's own batching) skips it.
    checked = lengths.numel() and not torch.compiler.is_compiling()
    if checked and (int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        raise ValueError(
            f"lengths must lie in [0, max_len={max_len}], got min {int(lengths.min())} "
            f"and max {int(lengths.max())}"
        )
    positions = torch.arange(max_len, device=lengths.device)  # (S,)
    keep = positions[None, :] < lengths[:, None]  # (B, S)
    return keep[:, None, None, :]  # (B, 1, 1, S)


def causal_mask(tq: int, tk: int | None = None, *, device: torch.device | None = None) -> Tensor:
    """Causal mask aligned bottom-right.

    Query ``i`` (of ``tq``) sits at absolute position ``tk - tq + i`` and may attend to keys
    ``0 .. tk - tq + i``. With ``tq == tk`` this is the usual lower triangle; with ``tq < tk`` the
    queries are the newest positions of a longer (cached) key sequence; with ``tq > tk`` the first
    ``tq - tk`` queries see no key at all (their output is zero).

    Returns:
        ``(tq, tk)`` boolean.
    """
    tk = tq if tk is None else tk
    if tq < 0 or tk < 0:
        raise ValueError(f"causal_mask needs non-negative lengths, got tq={tq}, tk={tk}")
    return torch.ones(tq, tk, dtype=torch.bool, device=device).tril(diagonal=tk - tq)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of boolean keep-masks; ``None`` entries mean "no restriction".

    The result keeps the broadcast shape of its inputs (nothing is expanded to ``(B, H, Tq, Tk)``
    unless the inputs force it).
    """
    result: Tensor | None = None
    for mask in masks:
        if mask is None:
            continue
        if mask.dtype != torch.bool:
            raise ValueError(f"combine_masks takes boolean keep-masks, got dtype {mask.dtype}")
        result = mask if result is None else result & mask
    return result


def from_key_padding(key_padding_mask: Tensor) -> Tensor:
    """Convert PyTorch's ``key_padding_mask`` (``(B, S)``, ``True`` = *ignore*) to a keep-mask.

    Returns:
        ``(B, 1, 1, S)`` boolean, ``True`` = may attend.
    """
    if key_padding_mask.dim() != 2 or key_padding_mask.dtype != torch.bool:
        raise ValueError(
            "key_padding_mask must be a boolean (B, S) tensor with True = ignore, got "
            f"shape {tuple(key_padding_mask.shape)} and dtype {key_padding_mask.dtype}"
        )
    return ~key_padding_mask[:, None, None, :]


def check_keep(mask: Tensor | None, name: str = "keep", *, has_bias: bool = False) -> None:
    """Raise ``ValueError`` unless ``mask`` is ``None`` or a boolean tensor.

    Integer, ``uint8`` and float 0/1 masks are refused rather than guessed at: read as an additive
    bias (as SDPA reads a float mask) a 0/1 mask gives padding *more* weight, and read with
    PyTorch's ``key_padding_mask`` polarity it is inverted. The message says what to pass instead.
    ``has_bias`` says whether the caller also takes ``bias=`` (so the message may point there).
    """
    if mask is None:
        return
    if not isinstance(mask, Tensor):
        raise ValueError(
            f"{name} must be a boolean torch.Tensor (True = may attend), got {type(mask).__name__}"
        )
    if mask.dtype == torch.bool:
        return
    hint = (
        f"pass {name}.bool() if nonzero means 'may attend', or "
        f"qkv.attention.masks.from_key_padding({name}.bool()) for PyTorch's key_padding_mask "
        "(True = ignore)"
    )
    if mask.dtype.is_floating_point and has_bias:
        hint += "; an additive float bias goes in bias="
    raise ValueError(
        f"{name} must be a boolean keep-mask (True = may attend), got dtype {mask.dtype} "
        f"and shape {tuple(mask.shape)}: {hint}"
    )


def check_mask(mask: Tensor, shape: tuple[int, ...], name: str = "mask") -> None:
    """Raise ``ValueError`` unless ``mask`` has at least 2 dims and broadcasts to ``shape``.

    ``shape`` is ``(B, H, Tq, Tk)``, or ``(B, Tq, Tk)`` for inputs without a head dim. Only shapes
    are inspected (no pass over the data), so the check is free on the fast path.
    """
    sizes = mask.shape
    if len(sizes) < 2:
        # A 1-d mask is ambiguous (a (Tk,) row shared by every query, or a (B,) or (B, Tk)
        # padding mask missing its dims), so it is refused rather than guessed at.
        raise ValueError(
            f"{name} has {len(sizes)} dim(s) (shape {tuple(sizes)}); a keep-mask needs at least "
            f"(Tq, Tk) and broadcasts to {_letters(shape)}: for a key-padding mask (B, Tk) pass "
            f"{name}[:, None, None, :] (qkv.attention.masks.padding_mask(lengths) builds one)"
        )
    if len(sizes) > len(shape):
        raise ValueError(
            f"{name} has {len(sizes)} dims (shape {tuple(sizes)}); expected at most "
            f"{len(shape)}, broadcastable to {_letters(shape)}"
        )
    for size, full in zip(reversed(sizes), reversed(shape), strict=False):
        if size != 1 and size != full:
            raise ValueError(
                f"{name} of shape {tuple(sizes)} does not broadcast to {_letters(shape)}"
            )


def _letters(shape: tuple[int, ...]) -> str:
    """``shape`` with its letters, for error messages: ``"(B, H, Tq, Tk) = (2, 8, 5, 5)"``."""
    letters = ("B", "H", "Tq", "Tk") if len(shape) == 4 else ("B", "Tq", "Tk")
    return f"({', '.join(letters)}) = {tuple(shape)}"


def as_4d(mask: Tensor) -> Tensor:
    """View a mask of up to 4 dims as 4 dims by adding leading size-1 dims."""
    if mask.dim() == 4:
        return mask
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
