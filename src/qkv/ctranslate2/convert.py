"""qkv's models as CTranslate2 models (Klein et al. 2020, "Efficient and High-Quality Neural
Machine Translation with OpenNMT"; https://opennmt.net/CTranslate2): a
:class:`~qkv.models.transformer.model.Transformer` as a ``TransformerSpec`` and a
:class:`~qkv.models.language_model.model.TransformerLM` as a ``TransformerDecoderModelSpec``, filled
directly with the weights (no converter in between), then saved as a CTranslate2 model directory.

What maps one to one, and what needs care:

* **Sub-layers.** CTranslate2's layers are qkv's: ``LayerNorm(x + Sublayer(x))`` when
  ``pre_norm`` is off (qkv's ``norm_first: false``), ``x + Sublayer(LayerNorm(x))`` with a final
  LayerNorm when on. Each attention's query, key and value projections are fused into one matrix
  (``[W_q; W_k; W_v]``; cross-attention: ``W_q`` and ``[W_k; W_v]``), grouped-query attention
  included (``num_heads_kv``). One LayerNorm epsilon serves the whole model.
* **Embeddings.** The encoder-decoder multiplies them by ``sqrt(D)`` (section 3.4), as
  CTranslate2's ``scale_embeddings`` does; the language model does not. A shared or tied matrix is
  given once per use; CTranslate2 stores equal variables once.
* **Sinusoidal positions.** qkv interleaves them (``PE[2i] = sin``, ``PE[2i + 1] = cos``,
  frequency ``base^(-2i / D)``, first position 0), while CTranslate2's built-in table
  concatenates sines and cosines with frequency ``10000^(-i / (D/2 - 1))`` starting at position 1.
  The export therefore writes qkv's own table, computed by the model's
  :class:`~qkv.layers.positional.SinusoidalPositionalEncoding`, for ``positions`` positions: the
  longest source or output the model may be asked for.
* **Rotary positions** (language models): qkv rotates halves (coordinate ``i`` with ``i + Dh/2``,
  GPT-NeoX / Llama), which is CTranslate2's ``rotary_interleave=False``, with the same base.

Refused, with a ``ValueError`` naming the feature, because CTranslate2 cannot compute it exactly:
a copying model (the pointer-generator's copy head, ``copy: true``), LayerNorms without weights
or with different epsilons, attention projections with biases on some of query, key and value
but not all, and a vocabulary whose tokens are not distinct strings (CTranslate2 maps token
strings to ids; the export lists qkv's vocabulary in id order, so CTranslate2's id ``i`` is
qkv's id ``i``). The recurrent models have no CTranslate2 counterpart: only these two classes are
taken. qkv's language model has no ALiBi option, so there is none to refuse.

``quantization`` stores the weights as CTranslate2's converters do (``spec.optimize``): ``None``
keeps float32; ``"int8"`` / ``"int8_float32"`` (8-bit weights with a float32 scale per row,
about a quarter of the size) or ``"int16"``. A float32 export can also run quantized: pass
``compute_type`` when loading it.

``ctranslate2`` is an optional dependency (``pip install 'qkv[ctranslate2]'``), imported only
inside the functions that need it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import torch
from torch import Tensor, nn

from qkv.attention.multihead import MultiHeadAttention
from qkv.io import fsync_dir, make_temporary_directory
from qkv.layers.feedforward import PositionwiseFeedForward
from qkv.models.language_model.model import TransformerLM
from qkv.models.transformer.model import Transformer

__all__ = [
    "QUANTIZATIONS",
    "SpecialTokens",
    "check_output_dir",
    "check_quantization",
    "ctranslate2_module",
    "language_model_spec",
    "save_spec",
    "transformer_spec",
]

# Weight types an export may store (None: float32). They all run on a CPU.
QUANTIZATIONS = ("int8", "int8_float32", "int16")
INSTALL = "pip install 'qkv[ctranslate2]'"


def ctranslate2_module() -> ModuleType:
    """The ``ctranslate2`` package, or a ``ModuleNotFoundError`` that says how to install it."""
    try:
        import ctranslate2
    except ImportError as error:
        raise ModuleNotFoundError(
            f"exporting to or running with CTranslate2 needs the ctranslate2 package: {INSTALL}",
            name="ctranslate2",
        ) from error
    return ctranslate2


@dataclass(frozen=True)
class SpecialTokens:
    """The token strings CTranslate2 starts and ends with: ``bos`` starts every output (the
    decoder's start token), ``eos`` ends it (and is appended to every source), ``unk`` stands for
    unknown input."""

    bos: str
    eos: str
    unk: str


def _activation(name: str) -> int:
    from ctranslate2.specs import common_spec

    activations = {
        "relu": common_spec.Activation.RELU,
        "gelu": common_spec.Activation.GELU,  # the exact (erf) GELU
        "gelu_tanh": common_spec.Activation.GELUTanh,
    }
    if name not in activations:
        raise ValueError(
            f"activation {name!r} has no CTranslate2 counterpart; exportable: "
            f"{', '.join(activations)}"
        )
    return activations[name]


def _weight(tensor: Tensor) -> Tensor:
    """A float32 CPU copy, detached from the model (later training cannot change the export)."""
    return tensor.detach().to("cpu", torch.float32).contiguous().clone()


def _set_linear(spec: Any, *linears: nn.Linear) -> None:
    """``spec`` (a ``LinearSpec``) as ``linears`` stacked along their outputs (a fused
    projection when several)."""
    biases: list[Tensor | None] = [linear.bias for linear in linears]
    if any(b is None for b in biases) and not all(b is None for b in biases):
        raise ValueError(
            "attention projections with biases on some of query, key and value but not all "
            "cannot be fused for CTranslate2"
        )
    spec.weight = _weight(torch.cat([linear.weight for linear in linears], dim=0))  # (O, I)
    if biases[0] is not None:
        spec.bias = _weight(torch.cat(cast("list[Tensor]", biases), dim=0))  # (O,): all set


def _set_norm(spec: Any, norm: nn.Module) -> None:
    if not isinstance(norm, nn.LayerNorm) or norm.weight is None or norm.bias is None:
        raise ValueError(
            f"CTranslate2 needs LayerNorms with a weight and a bias, got {norm!r}; export a "
            "model whose norms are nn.LayerNorm(elementwise_affine=True)"
        )
    spec.gamma = _weight(norm.weight)
    spec.beta = _weight(norm.bias)


def _set_attention(spec: Any, attention: MultiHeadAttention, *, cross: bool) -> None:
    if attention.d_k * attention.num_heads != attention.d_model or attention.d_v != attention.d_k:
        raise ValueError(
            f"CTranslate2 needs head widths d_k = d_v = d_model / num_heads, got d_k="
            f"{attention.d_k}, d_v={attention.d_v}, d_model={attention.d_model}, num_heads="
            f"{attention.num_heads}"
        )
    if cross:
        _set_linear(spec.linear[0], attention.q_proj)
        _set_linear(spec.linear[1], attention.k_proj, attention.v_proj)
    else:
        _set_linear(spec.linear[0], attention.q_proj, attention.k_proj, attention.v_proj)
    _set_linear(spec.linear[-1], attention.out_proj)


def _set_ffn(spec: Any, ffn: PositionwiseFeedForward, norm: nn.Module) -> None:
    _set_norm(spec.layer_norm, norm)
    _set_linear(spec.linear_0, ffn.linear1)
    _set_linear(spec.linear_1, ffn.linear2)


def _epsilon(model: nn.Module) -> float:
    """The one LayerNorm epsilon of ``model`` (CTranslate2 has one per model)."""
    found = {m.eps for m in model.modules() if isinstance(m, nn.LayerNorm)}
    if len(found) != 1:
        raise ValueError(
            f"CTranslate2 takes one LayerNorm epsilon per model, this one has {sorted(found)}"
        )
    return found.pop()


def _vocabulary(tokens: Sequence[str], size: int, name: str, special: SpecialTokens) -> list[str]:
    """``tokens`` checked: one distinct string per id of a vocabulary of ``size``."""
    tokens = list(tokens)
    if len(tokens) != size:
        raise ValueError(f"the {name} vocabulary has {len(tokens)} tokens, the model {size}")
    seen: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if not isinstance(token, str):
            raise ValueError(f"{name} token {index} is {token!r}, not a string")
        if token in seen:
            raise ValueError(
                f"{name} tokens {seen[token]} and {index} are both {token!r}: CTranslate2 maps "
                "token strings to ids, so they must be distinct"
            )
        seen[token] = index
    for role in ("bos", "eos", "unk"):
        if getattr(special, role) not in seen:
            raise ValueError(
                f"the {role} token {getattr(special, role)!r} is not in the {name} vocabulary"
            )
    return tokens


def transformer_spec(
    model: nn.Module,  # checked below: a Transformer
    source_vocabulary: Sequence[str],
    target_vocabulary: Sequence[str],
    *,
    special: SpecialTokens,
    positions: int,
) -> Any:
    """A ``ctranslate2.specs.TransformerSpec`` holding ``model``'s weights.

    Args:
        model: a trained :class:`~qkv.models.transformer.model.Transformer` (not a copying one).
        source_vocabulary, target_vocabulary: each id's token string, in id order.
        special: the start, end and unknown tokens; CTranslate2 appends ``eos`` to each source
            (as qkv does) and starts each output from ``bos``.
        positions: rows of the sinusoidal table: more than the longest source (EOS included)
            and than the longest output (EOS included) the model will be asked for.

    Raises:
        ValueError: naming what CTranslate2 cannot represent (see the module doc).
    """
    ctranslate2_module()
    from ctranslate2.specs import transformer_spec as specs

    if not isinstance(model, Transformer):
        raise ValueError(
            f"transformer_spec exports qkv.models.transformer.Transformer, got "
            f"{type(model).__name__}; CTranslate2 has no recurrent encoder-decoder"
        )
    c = model.config
    if model.copy_head is not None:
        raise ValueError(
            "a copying model (copy: true, the pointer-generator's copy head) cannot be exported: "
            "CTranslate2 has no copy attention or extended vocabulary"
        )
    if isinstance(positions, bool) or not isinstance(positions, int) or positions < 1:
        raise ValueError(f"positions must be an int >= 1, got {positions!r}")
    source = _vocabulary(source_vocabulary, c.src_vocab_size, "source", special)
    target = _vocabulary(target_vocabulary, c.tgt_vocab_size, "target", special)
    activation = _activation(c.activation)
    options = {"pre_norm": c.norm_first, "activation": activation}
    # return_attention gives the cross-attention of alignment_layer averaged over its first
    # alignment_heads heads: here the last layer's first head alone (CTranslate2's defaults,
    # spelled out: qkv.ctranslate2.views titles the explorer's map with them).
    spec = specs.TransformerSpec(
        specs.TransformerEncoderSpec(c.num_encoder_layers, c.num_heads, **options),
        specs.TransformerDecoderSpec(
            c.num_decoder_layers, c.num_heads, alignment_layer=-1, alignment_heads=1, **options
        ),
    )
    table = _weight(model.positional.encoding(torch.arange(positions)))  # (P, D), qkv's layout
    encoder, decoder = spec.encoder, spec.decoder
    encoder.scale_embeddings = decoder.scale_embeddings = True  # E * sqrt(D), section 3.4
    encoder.embeddings[0].weight = _weight(model.src_embed.weight)  # (V_src, D)
    decoder.embeddings.weight = _weight(model.tgt_embed.weight)  # (V_tgt, D)
    encoder.position_encodings.encodings = table
    decoder.position_encodings.encodings = table
    for layer_spec, layer in zip(encoder.layer, model.encoder.layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, cross=False)
        _set_norm(layer_spec.self_attention.layer_norm, layer.norm1)
        _set_ffn(layer_spec.ffn, layer.ffn, layer.norm2)
    for layer_spec, block in zip(decoder.layer, model.decoder.layers, strict=True):
        _set_attention(layer_spec.self_attention, block.self_attn, cross=False)
        _set_norm(layer_spec.self_attention.layer_norm, block.norm1)
        _set_attention(layer_spec.attention, block.cross_attn, cross=True)
        _set_norm(layer_spec.attention.layer_norm, block.norm2)
        _set_ffn(layer_spec.ffn, block.ffn, block.norm3)
    if c.norm_first:  # pre-norm stacks end with one more LayerNorm
        _set_norm(encoder.layer_norm, model.encoder.norm)
        _set_norm(decoder.layer_norm, model.decoder.norm)
    decoder.projection.weight = _weight(model.output_proj.weight)  # (V_tgt, D), tied or not
    spec.config.layer_norm_epsilon = _epsilon(model)
    spec.config.bos_token, spec.config.eos_token = special.bos, special.eos
    spec.config.unk_token = special.unk
    spec.config.decoder_start_token = special.bos
    spec.config.add_source_bos, spec.config.add_source_eos = False, True
    spec.register_source_vocabulary(source)
    spec.register_target_vocabulary(target)
    return spec


def language_model_spec(
    model: TransformerLM, vocabulary: Sequence[str], *, special: SpecialTokens
) -> Any:
    """A ``ctranslate2.specs.TransformerDecoderModelSpec`` holding ``model``'s weights: pre-norm
    blocks, learned or rotary positions, grouped-query attention, tied or separate output
    projection (a GPT-2 imported by :mod:`qkv.interop.gpt2` included).

    ``vocabulary``: each id's token string, in id order; ``special``: the tokens CTranslate2's
    configuration names (``eos`` ends a generation).
    """
    ctranslate2_module()
    from ctranslate2.specs import transformer_spec as specs

    if not isinstance(model, TransformerLM):
        raise ValueError(
            f"language_model_spec exports qkv.models.language_model.TransformerLM, got "
            f"{type(model).__name__}"
        )
    c = model.config
    tokens = _vocabulary(vocabulary, c.vocab_size, "language model", special)
    if c.positions not in ("learned", "rotary"):
        raise ValueError(f"positions {c.positions!r} have no CTranslate2 counterpart")
    rotary = model.blocks.layers[0].self_attn.rotary
    options: dict[str, Any] = {}
    if rotary is not None:
        # rotary_dim=0: every coordinate; not interleaved: qkv rotates halves (i with i + Dh/2).
        options = {"rotary_dim": 0, "rotary_interleave": False, "rotary_base": rotary.base}
    heads_kv = c.num_kv_heads if c.num_kv_heads not in (None, c.num_heads) else None
    spec = specs.TransformerDecoderModelSpec.from_config(
        c.num_layers,
        c.num_heads,
        pre_norm=True,
        activation=_activation(c.activation),
        num_heads_kv=heads_kv,
        **options,
    )
    decoder = spec.decoder
    decoder.scale_embeddings = False  # GPT: no sqrt(D)
    decoder.embeddings.weight = _weight(model.embed.weight)  # (V, D)
    if model.positional is not None:
        decoder.position_encodings.encodings = _weight(model.positional.embedding.weight)
    for layer_spec, block in zip(decoder.layer, model.blocks.layers, strict=True):
        _set_attention(layer_spec.self_attention, block.self_attn, cross=False)
        _set_norm(layer_spec.self_attention.layer_norm, block.norm1)
        _set_ffn(layer_spec.ffn, block.ffn, block.norm2)
    _set_norm(decoder.layer_norm, model.blocks.norm)
    decoder.projection.weight = _weight(model.output_proj.weight)  # (V, D)
    spec.config.layer_norm_epsilon = _epsilon(model)
    spec.config.bos_token, spec.config.eos_token = special.bos, special.eos
    spec.config.unk_token = special.unk
    spec.register_vocabulary(tokens)
    return spec


def check_quantization(quantization: str | None) -> str | None:
    """``quantization`` if an export may store weights so (``None``: float32)."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ValueError(
            f"quantization must be one of {', '.join(QUANTIZATIONS)} (or None: float32), got "
            f"{quantization!r}"
        )
    return quantization


def check_output_dir(out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """``out_dir`` if an export may be written there: absent, an empty directory, or (with
    ``overwrite``) a directory to replace. Call it before any work, so a refusal costs nothing."""
    out = Path(out_dir)
    if out.is_symlink():
        raise FileExistsError(f"{out} is a symbolic link; choose another output")
    if out.exists():
        if not out.is_dir():
            raise FileExistsError(f"{out} exists and is not a directory; choose another output")
        if any(out.iterdir()) and not overwrite:
            raise FileExistsError(
                f"{out} exists and is not empty; choose another output, or pass --overwrite "
                "(overwrite=True) to replace it"
            )
    return out


def save_spec(
    spec: Any,
    out_dir: str | Path,
    *,
    quantization: str | None = None,
    overwrite: bool = False,
    extra: Callable[[Path], None] | None = None,
) -> Path:
    """Save ``spec`` as a CTranslate2 model directory at ``out_dir``, whole or not at all.

    The model is written into a temporary directory beside ``out_dir`` (``.NAME.XXXXXXXX.tmp``),
    ``extra(directory)`` adds files of its own there (qkv's tokenizers and run configuration),
    and the directory is renamed into place; on any error the temporary directory is removed and
    ``out_dir`` is left as it was. An existing non-empty ``out_dir`` is refused unless
    ``overwrite``.

    Returns:
        ``out_dir``, holding ``model.bin``, ``config.json`` and the vocabulary files.
    """
    check_quantization(quantization)
    out = check_output_dir(out_dir, overwrite=overwrite)
    spec.validate()
    spec.optimize(quantization=quantization)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temporary_directory(out.parent, out.name)
    old: Path | None = None
    try:
        spec.save(str(tmp))
        if extra is not None:
            extra(tmp)
        for path in tmp.rglob("*"):
            if path.is_file():
                _fsync(path)
        if out.exists():  # empty, or overwrite: move it aside first, remove it after the swap
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
            os.replace(out, old / "replaced")
        os.replace(tmp, out)
    except BaseException as error:
        if old is not None and (old / "replaced").exists() and not out.exists():
            os.replace(old / "replaced", out)  # put the previous output back
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, OSError):  # name the output, keep the errno (and its subclass)
            reason = error.strerror or str(error)
            if error.errno is None:
                raise OSError(f"cannot write {out}: {reason}") from error
            raise OSError(error.errno, f"cannot write {out}: {reason}") from error
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    fsync_dir(out.parent)
    return out


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
