"""Only a boolean tensor is a mask, in every public module that attends.

Integer, ``uint8`` and float 0/1 masks are what users of Joey NMT, fairseq and Keras pass. Read as
an additive bias (as SDPA reads a float mask) they give padding *more* weight: with the old
behaviour ``attend`` put 0.80 of a row on padded keys. Each module must refuse them with an error
that names the dtype and says what to pass instead, and accept the same mask as ``bool``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from qkv.attention import (
    Additive,
    HardAttention,
    MultiHeadAttention,
    ScaledDot,
    attend,
    padding_mask,
)
from qkv.layers.pooling import AttentionPooling, StructuredSelfAttention, max_pool, mean_pool
from qkv.layers.text_encoder import RecurrentTextEncoder, TextEncoderConfig, TransformerTextEncoder
from qkv.layers.transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from qkv.models.bert.model import BertConfig, BertEncoder
from qkv.models.classifier import EncoderClassifier, EncoderClassifierConfig
from qkv.models.language_model.model import TransformerLM, TransformerLMConfig
from qkv.models.show_attend_tell.model import ShowAttendTell, ShowAttendTellConfig
from qkv.models.tagger import SequenceTagger, SequenceTaggerConfig

B, T, S, D, H, V = 2, 4, 5, 8, 2, 11
LENGTHS = torch.tensor([S, 2])


def _x(*shape: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _ids(t: int) -> Tensor:
    return torch.randint(1, V, (B, t), generator=torch.Generator().manual_seed(1))


def _pad4(t: int = S) -> Tensor:
    return padding_mask(torch.tensor([t, 2]), t)  # (B, 1, 1, t)


def _pad2(t: int = S) -> Tensor:
    return _pad4(t)[:, 0, 0]  # (B, t)


def _text(encoder: str) -> TextEncoderConfig:
    extra = {"encoder": "bilstm", "self_attention": True} if encoder == "bilstm" else {}
    return TextEncoderConfig(V, d_model=D, num_heads=H, num_layers=1, d_ff=16, **extra)


def _captioner() -> ShowAttendTell:
    config = ShowAttendTellConfig(
        tile_height=8, tile_width=8, conv_channels=(4,), feature_dim=8, embed_dim=8,
        hidden_dim=8, attention_dim=8,
    )  # fmt: skip
    return ShowAttendTell(config).eval()  # no feature dropout: calls comparable


def _caption_keep(model: ShowAttendTell, tiles: int = 2) -> Tensor:
    gh, gw = model.config.regions_per_tile
    tile_keep = torch.tensor([[True, True], [True, False]])  # (B, n)
    return tile_keep[:, None, :, None].expand(B, gh, tiles, gw).reshape(B, gh, tiles * gw)


def _encode_strip(model: ShowAttendTell, m: Callable[[Tensor], Tensor]) -> object:
    return model.encode(_x(B, 1, 8, 16), m(_caption_keep(model)))  # two 8x8 tiles


# name -> a function of the keep-mask (the boolean version must run without error)
CASES: dict[str, Callable[[Callable[[Tensor], Tensor]], object]] = {
    "attend (fused)": lambda m: attend(
        _x(B, H, T, D), _x(B, H, S, D), _x(B, H, S, D), keep=m(_pad4())
    ),
    "attend (chunked)": lambda m: attend(
        _x(B, H, T, D), _x(B, H, S, D), _x(B, H, S, D), keep=m(_pad4()), need_weights=True
    ),
    "attend (additive)": lambda m: attend(
        _x(B, T, D), _x(B, S, D), _x(B, S, D), score=Additive(D, D, 4), keep=m(_pad4()[:, 0])
    ),
    "MultiHeadAttention": lambda m: MultiHeadAttention(D, H)(
        _x(B, T, D), _x(B, S, D), keep=m(_pad4())
    ),
    "HardAttention": lambda m: HardAttention(ScaledDot()).eval()(
        _x(B, T, D), _x(B, S, D), _x(B, S, D), keep=m(_pad4()[:, 0])
    ),
    "TransformerEncoderLayer": lambda m: TransformerEncoderLayer(D, H, 16)(
        _x(B, S, D), keep=m(_pad4())
    ),
    "TransformerEncoder": lambda m: TransformerEncoder(1, D, H, 16)(_x(B, S, D), keep=m(_pad4())),
    "TransformerDecoderLayer (memory)": lambda m: TransformerDecoderLayer(D, H, 16)(
        _x(B, T, D), _x(B, S, D), memory_keep=m(_pad4())
    ),
    "TransformerDecoder (memory)": lambda m: TransformerDecoder(1, D, H, 16)(
        _x(B, T, D), _x(B, S, D), memory_keep=m(_pad4())
    ),
    "AttentionPooling": lambda m: AttentionPooling(D, 4)(_x(B, S, D), m(_pad2())),
    "StructuredSelfAttention": lambda m: StructuredSelfAttention(D, 4, 2)(_x(B, S, D), m(_pad2())),
    "mean_pool": lambda m: mean_pool(_x(B, S, D), m(_pad2())),
    "max_pool": lambda m: max_pool(_x(B, S, D), m(_pad2())),
    "TransformerTextEncoder": lambda m: TransformerTextEncoder(_text("transformer"))(
        _ids(S), keep=m(_pad2())
    ),
    "RecurrentTextEncoder": lambda m: RecurrentTextEncoder(_text("bilstm"))(
        _ids(S), keep=m(_pad2())
    ),
    "BertEncoder": lambda m: BertEncoder(BertConfig.preset("tiny"))(_ids(S), keep=m(_pad2())),
    "EncoderClassifier": lambda m: EncoderClassifier(
        EncoderClassifierConfig.from_flat(
            dict(vocab_size=V, num_labels=3, d_model=D, num_heads=H, num_layers=1, d_ff=16)
        )
    )(_ids(S), keep=m(_pad2())),
    "SequenceTagger": lambda m: SequenceTagger(
        SequenceTaggerConfig.from_flat(
            dict(vocab_size=V, num_tags=3, d_model=D, num_heads=H, num_layers=1, d_ff=16)
        )
    )(_ids(S), keep=m(_pad2())),
    "TransformerLM": lambda m: TransformerLM(
        TransformerLMConfig(vocab_size=V, max_len=16, d_model=D, num_heads=H, num_layers=1, d_ff=16)
    )(_ids(S), keep=m(_pad2()).flip(1)),  # left padding
    "ShowAttendTell.encode": lambda m: _encode_strip(_captioner(), m),
}

WRONG = {
    "int64": lambda mask: mask.long(),
    "int32": lambda mask: mask.int(),
    "uint8": lambda mask: mask.to(torch.uint8),
    "float32": lambda mask: mask.float(),
}


def _main(out: object) -> Tensor:
    """The output a mask acts on: the tensor itself, or the first tensor field of a result
    (context, vector, logits, hidden or encoded features)."""
    if isinstance(out, Tensor):
        return out
    for name in ("context", "vector", "logits", "hidden", "features"):
        value = getattr(out, name, None)
        if isinstance(value, Tensor):
            return value
    fields = [v for v in getattr(out, "__dict__", {}).values() if isinstance(v, Tensor)]
    assert fields, f"no tensor in {type(out).__name__}"
    return fields[0]


# Cases whose module needs a mask (no keep=None path): their unmasked reference is an all-True mask.
NEEDS_A_MASK = {"AttentionPooling", "StructuredSelfAttention", "mean_pool", "max_pool",
                "TransformerLM"}  # fmt: skip
LEFT_PADDED = {"TransformerLM"}
GARBAGE = 1e4


def _with_garbage(case: str) -> tuple[Callable, Callable]:
    """``_x`` and ``_ids`` that fill batch row 1's padded positions (the last S - 2 along the
    length-S dimension, the first S - 2 when left-padded; the captioner's second tile) with
    huge values or other token ids: what a working mask hides."""
    pad = slice(0, S - 2) if case in LEFT_PADDED else slice(2, S)
    base_x, base_ids = _x, _ids  # the module's own, before the test replaces them

    def x(*shape: int) -> Tensor:
        out = base_x(*shape)
        if shape == (B, 1, 8, 16):  # the captioner's strip: row 1 keeps its first 8x8 tile
            out[1, :, :, 8:] = GARBAGE
        elif S in shape[1:]:
            index = [1] + [slice(None)] * (len(shape) - 1)
            index[shape.index(S, 1)] = pad
            out[tuple(index)] = GARBAGE
        return out

    def ids(t: int) -> Tensor:
        out = base_ids(t)
        out[1, pad] = out[1, pad] % (V - 1) + 1  # every id in 1..V-1 becomes another one
        return out

    return x, ids


@pytest.mark.parametrize("case", CASES)
def test_boolean_mask_is_accepted_and_masks_only_the_padded_row(case, monkeypatch):
    """Batch row 0 is unpadded: its output equals the call with no mask at all (``keep=None``,
    a path that never reads a mask; an all-True mask for modules that need one), so a mask read
    with the wrong polarity on any path is caught. Row 1 keeps 2 positions: its output (at those
    positions, for a module with an output per position) must not change when its padded
    positions hold garbage (a mask ignored or inverted lets the garbage in), and must differ
    from the unmasked call."""
    unmasked = torch.ones_like if case in NEEDS_A_MASK else (lambda mask: None)
    torch.manual_seed(0)
    masked = _main(CASES[case](lambda mask: mask))
    torch.manual_seed(0)
    reference = _main(CASES[case](unmasked))
    assert masked.shape == reference.shape and torch.isfinite(masked).all()
    torch.testing.assert_close(masked[0], reference[0], atol=1e-6, rtol=1e-6)
    assert not torch.allclose(masked[1], reference[1], atol=1e-4, rtol=1e-4)

    x, ids = _with_garbage(case)
    monkeypatch.setattr(sys.modules[__name__], "_x", x)
    monkeypatch.setattr(sys.modules[__name__], "_ids", ids)
    torch.manual_seed(0)
    garbled = _main(CASES[case](lambda mask: mask))
    kept = slice(None)  # an output per position (B, S, ...): only the kept positions' are defined
    if masked.dim() > 2 and masked.shape[1] == S:
        kept = slice(S - 2, S) if case in LEFT_PADDED else slice(0, 2)
    assert torch.isfinite(garbled[1, kept]).all()
    torch.testing.assert_close(garbled[1, kept], masked[1, kept], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("wrong", WRONG)
@pytest.mark.parametrize("case", CASES)
def test_other_mask_dtypes_are_refused_naming_the_dtype(case, wrong):
    torch.manual_seed(0)
    dtype = str(WRONG[wrong](torch.ones(1, dtype=torch.bool)).dtype)
    with pytest.raises(ValueError, match="boolean") as error:
        CASES[case](WRONG[wrong])
    assert dtype in str(error.value)
    assert ".bool()" in str(error.value)  # says what to pass instead


def test_a_float_mask_is_no_longer_read_as_a_bias():
    """The reported case: a float 0/1 padding mask used as a bias put most weight on padding."""
    q, k, v = _x(1, 1, 1, D), _x(1, 1, S, D), _x(1, 1, S, D)
    keep = torch.tensor([[1.0, 1.0, 0.0, 0.0, 0.0]])  # (Tq, Tk): a 1-d mask is refused
    with pytest.raises(ValueError, match=r"float32.*bias="):
        attend(q, k, v, keep=keep, need_weights=True)
    weights = attend(q, k, v, keep=keep.bool(), need_weights=True).weights
    assert float(weights[..., 2:].sum()) == 0.0


def test_a_non_float_bias_is_refused():
    q, k, v = _x(1, 1, T, D), _x(1, 1, S, D), _x(1, 1, S, D)
    with pytest.raises(ValueError, match=r"bias must be a floating-point tensor.*torch.bool"):
        attend(q, k, v, bias=torch.ones(T, S, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"torch\.int64"):
        attend(q, k, v, bias=torch.zeros(T, S, dtype=torch.long))


def test_a_mask_that_is_not_a_tensor_is_refused():
    q, k, v = _x(1, 1, T, D), _x(1, 1, S, D), _x(1, 1, S, D)
    with pytest.raises(ValueError, match="got list"):
        attend(q, k, v, keep=[True] * S)
