"""Linear layers packed for inference in one of three weight precisions, shared by the lean
decode steps (:mod:`qkv.models.language_model.decode`, :mod:`qkv.models.transformer.decode`).

A decoded token reads every weight once and does little arithmetic per byte, so the weights'
bytes and the kernel that reads them set the speed:

- ``"float32"``: the weight transposed to ``(D_in, D_out)``, so that ``x @ W`` with few rows
  reads it in storage order (2-3x faster than ``F.linear`` on one row on the CPUs measured);
  activations float32. Equal to the module path.
- ``"bfloat16"``: half the bytes; the weight as it is ``(D_out, D_in)``: one row goes through
  the matrix-vector kernel (full memory bandwidth), more rows through ``F.linear`` (AMX or
  AVX-512 BF16 tiles where the CPU has them: about 4x float32 at 128 rows). Activations entering
  a linear layer are rounded to bfloat16; the residual stream, LayerNorms and softmaxes stay
  float32.
- ``"int8"``: int8 weights times int8 activations, summed in int32: each output row ``j``
  keeps ``round(W_j / s_j)`` in ``[-127, 127]`` with ``s_j = max |W_j| / 127`` (symmetric, one
  scale per output channel), and every product quantises its input as it comes (one scale and
  zero point for the whole input, from its range: dynamic quantisation), through PyTorch's
  dynamically quantized linear layer (:class:`torch.ao.nn.quantized.dynamic.Linear`, FBGEMM's
  x86 kernels, VNNI where the CPU has it). Inputs and outputs float32. At the decode steps'
  sizes this was 3-8x faster than float32 on a Zen 5 EPYC, at one row as at 128 (the
  weight-only kernel it replaces, int8 weights widened for bfloat16 products, was 1.2-2x).
  One scale for the whole input means a row's output can change with the other rows of its
  batch (slightly: within the recorded agreement).

:func:`linear` takes activations in :func:`activation_dtype` of the precision.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_args

import torch
import torch.nn.functional as F
from torch import Tensor

Precision = Literal["float32", "bfloat16", "int8"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


def check_precision(precision: object) -> Precision:
    """``precision`` if it is one of :data:`PRECISIONS`, else a ``ValueError`` naming them."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return cast(Precision, precision)  # one of PRECISIONS: checked above


T = TypeVar("T")


def packed_for(model: torch.nn.Module, precision: Precision, build: Callable[[], T]) -> T:
    """``build()`` (a model's weights packed in ``precision``), kept on ``model`` until any
    parameter changes (every in-place update moves a tensor's version counter), so a model
    still training is packed again after each update and a served one once."""
    key = (precision, *((p.data_ptr(), p._version, p.device) for p in model.parameters()))
    cached: Any = model.__dict__.get("_packed_weights")
    if cached is None or cached[0] != key:
        cached = (key, build())
        model.__dict__["_packed_weights"] = cached
    return cached[1]


def activation_dtype(precision: Precision) -> torch.dtype:
    """The dtype of what enters a linear layer (and of the KV caches) in ``precision``."""
    return torch.bfloat16 if precision == "bfloat16" else torch.float32


@dataclass(frozen=True)
class PackedLinear:
    """One linear layer's weight in the layout :func:`linear` reads fastest.

    Attributes:
        weight: float32 ``(D_in, D_out)``; bfloat16 ``(D_out, D_in)``; int8 ``(D_out, D_in)``.
        bias: ``(D_out,)`` in the activation dtype, or ``None``.
        scales: int8 only: ``(D_out,)`` float32 per-channel scales.
        quantized: int8 only: the dynamically quantized layer holding the same weight, packed
            for FBGEMM.
    """

    weight: Tensor
    bias: Tensor | None
    scales: Tensor | None = None
    quantized: torch.nn.Module | None = None

    @property
    def nbytes(self) -> int:
        """Bytes one product reads: weight, scales and bias."""
        parts = (self.weight, self.bias, self.scales)
        return sum(p.numel() * p.element_size() for p in parts if p is not None)


def quantize_int8(weight: Tensor) -> tuple[Tensor, Tensor]:
    """``weight (D_out, D_in)`` as int8 ``(D_out, D_in)`` and float32 scales ``(D_out,)``: the
    symmetric per-output-channel quantisation described in the module docstring (a row of
    zeros gets scale 1)."""
    weight = weight.detach().float()
    peak = weight.abs().amax(dim=1)  # (D_out,)
    scales = torch.where(peak > 0, peak / 127.0, torch.ones_like(peak))
    quantized = torch.round(weight / scales[:, None]).clamp(-127, 127).to(torch.int8)
    return quantized.contiguous(), scales


def pack(weight: Tensor, bias: Tensor | None, precision: Precision) -> PackedLinear:
    """``weight (D_out, D_in)`` and ``bias (D_out,)`` (copies, detached) for :func:`linear`."""
    dtype = activation_dtype(precision)
    bias = None if bias is None else bias.detach().to(dtype).clone()
    if precision == "float32":
        return PackedLinear(weight.detach().float().t().contiguous(), bias)
    if precision == "bfloat16":
        return PackedLinear(weight.detach().to(torch.bfloat16).contiguous(), bias)
    quantized, scales = quantize_int8(weight)
    return PackedLinear(quantized, bias, scales, _dynamic_int8(quantized, scales, bias))


def _dynamic_int8(quantized: Tensor, scales: Tensor, bias: Tensor | None) -> torch.nn.Module:
    """PyTorch's dynamically quantized linear layer for ``quantized (D_out, D_in)`` int8 with
    ``scales (D_out,)``. Its weight is a quantized tensor; PyTorch now warns that making one
    is deprecated (the layer itself is not; its maintained successor is the ``torchao``
    package), so that warning is kept from the caller's log."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    out_features, in_features = quantized.shape
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*quantize_per_channel.*deprecated")
        layer = DynamicLinear(in_features, out_features, bias_=bias is not None, dtype=torch.qint8)
        weight = torch.quantize_per_channel(
            quantized.float() * scales[:, None], scales.double(),
            torch.zeros(out_features, dtype=torch.long), 0, torch.qint8,
        )  # fmt: skip
        layer.set_weight_bias(weight, bias)
    return layer


def linear(x: Tensor, packed: PackedLinear) -> Tensor:
    """``x (N, D_in)`` (in the precision's activation dtype) times the packed weight, plus its
    bias: ``(N, D_out)`` in the same dtype."""
    weight, bias = packed.weight, packed.bias
    if packed.quantized is not None:  # int8 by int8
        return packed.quantized(x)
    if weight.dtype == torch.float32:  # (D_in, D_out)
        return x @ weight if bias is None else torch.addmm(bias, x, weight)
    if x.size(0) == 1:  # one row: the matrix-vector kernel reads (D_out, D_in) at full bandwidth
        out = torch.mv(weight, x[0])
        return (out if bias is None else out + bias)[None]
    return F.linear(x, weight, bias)


def fused(linears: list[torch.nn.Linear], precision: Precision) -> PackedLinear:
    """Several linear layers that read the same input as one packed layer (their outputs
    concatenated in order): one product instead of several."""
    weight = torch.cat([lin.weight.detach() for lin in linears], dim=0)
    biases = [lin.bias for lin in linears]
    if all(b is None for b in biases):
        return pack(weight, None, precision)
    bias = torch.cat(
        [
            torch.zeros(lin.out_features) if b is None else b.detach()
            for lin, b in zip(linears, biases, strict=True)
        ]
    )
    return pack(weight, bias, precision)
