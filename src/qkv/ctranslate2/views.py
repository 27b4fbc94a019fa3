"""An exported translation model (``qkv export --format ctranslate2``) as a runner the explorer
serves (``qkv serve --engine ctranslate2``): its translation and the one attention map
CTranslate2 returns with it (``return_attention=True``), as a
:class:`~qkv.tasks.seen.TokenView`.

What that map is (CTranslate2 4.x, ``TransformerDecoder``): the cross-attention of one decoder
layer, ``alignment_layer`` (the export sets -1: the last), averaged over its first
``alignment_heads`` heads (the export sets 1: the first head alone, no mean over heads).
CTranslate2 drops the column of the EOS it appends to the source; with one sentence there is no
padding, so that column is ``1 -`` the row's sum, and it is put back: the rows are distributions
over the source pieces qkv's own views show (EOS included), comparable with
:class:`~qkv.tasks.translation.runner.Translator`'s last-layer first-head cross-attention.

There is nothing else to show: no other layer, head or attention kind, no query and key vectors
(``neuron``), no rollout, no given ``target`` (CTranslate2 cannot read an output by teacher
forcing here); :func:`~qkv.tasks.view_extras.checked_views` refuses them as for every runner.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch import Tensor

from qkv.ctranslate2 import compute_type
from qkv.ctranslate2.engine import CTranslate2Translator, check_export
from qkv.data.tokens.special import EOS_ID
from qkv.tasks.input_checks import one_text
from qkv.tasks.seen import ImageView, Seen, TokenView
from qkv.tasks.spec import TaskSpec, ViewOptions
from qkv.tasks.translation.task import TASK as TRANSLATION
from qkv.tasks.view_extras import NoExtras, checked_views

__all__ = ["TASK", "CTranslate2Views", "exported_task", "with_source_eos"]

# The translation task as the explorer serves an export of it: this module's runner.
TASK: TaskSpec = dataclasses.replace(
    TRANSLATION,
    label="CTranslate2 translation model",
    runner="qkv.ctranslate2.views:CTranslate2Views",
    exporter=None,
)
# A row may sum past 1 by float32 rounding; by more, the map is not what this module reads.
SUM_TOLERANCE = 1e-4


def exported_task(directory: str | Path) -> TaskSpec:
    """The task the explorer serves an exported ``directory`` as (:data:`TASK`: translation);
    a qkv run directory, or no model at all, is refused, naming what to pass
    (:func:`~qkv.ctranslate2.engine.check_export`; loading checks the rest: the files' sizes
    and hashes, the exported task)."""
    check_export(directory)
    return TASK


def with_source_eos(rows: list[list[float]], source_len: int) -> Tensor:
    """CTranslate2's attention ``rows`` ``(T, source_len)``, over the source tokens it was given,
    with the column of the EOS it appended put back as ``1 -`` each row's sum: ``(T,
    source_len + 1)``, each row a distribution.

    Raises:
        ValueError: the rows are not ``source_len`` wide, or one sums to more than 1 (they are
            not the softmax rows this reads them as).
    """
    if not rows:
        return torch.zeros(0, source_len + 1)
    weights = torch.tensor(rows, dtype=torch.float32)  # (T, S - 1)
    if weights.dim() != 2 or weights.size(1) != source_len:
        raise ValueError(
            f"CTranslate2 returned attention of shape {tuple(weights.shape)}; expected (T, "
            f"{source_len}): one column per source token, the EOS it appends left out"
        )
    rest = 1 - weights.sum(dim=1, keepdim=True)  # (T, 1): the EOS column
    if (rest < -SUM_TOLERANCE).any():
        raise ValueError(
            f"CTranslate2's attention rows sum to up to {1 - float(rest.min()):.6f}, more than 1: "
            "not the softmax rows over the source this reads them as"
        )
    return torch.cat([weights, rest.clamp(min=0)], dim=1)  # (T, S)


class CTranslate2Views(NoExtras):
    """:class:`~qkv.ctranslate2.engine.CTranslate2Translator` answering what the explorer asks
    of a runner: ``token_count``, ``extras`` (none) and ``views`` (the module doc says what the
    one view is)."""

    def __init__(self, translator: CTranslate2Translator) -> None:
        self.translator = translator

    @classmethod
    def load(
        cls, directory: str | Path, *, precision: str | None = None, threads: int = 0
    ) -> CTranslate2Views:
        """Load an export (``precision``: CTranslate2's compute type, as ``qkv translate
        --engine ctranslate2 --precision`` picks it; default: the type the export stored;
        ``threads``: CTranslate2's threads per call, 0 for its default)."""
        translator = CTranslate2Translator.load(
            directory, compute_type=compute_type(precision), threads=threads
        )
        return cls(translator)

    @property
    def title(self) -> str:
        """The view's title: whose attention, which layer and head, and the restored column."""
        t = self.translator
        return (
            f"CTranslate2's cross-attention (target x source), as it returns it: decoder layer "
            f"{t.layers - 1} (the last), head 0 alone of {t.heads} (not a mean over heads); the "
            "</s> column, which it leaves out, is 1 minus the rest of the row"
        )

    def token_count(self, text: str) -> int:
        """The source tokens the encoder reads for ``text``, end of sentence included."""
        return len(self.translator.source_tokenizer.encode(one_text(text))) + 1

    @checked_views
    def views(self, item: str, options: ViewOptions | None = None) -> Seen:
        """Translate ``item`` (with ``options.beam``; default: the model's) and return its
        translation and CTranslate2's cross-attention: one layer of one head, ``(1, T, S)``,
        ``T`` counting the EOS when the search wrote one, ``S`` the source EOS."""
        options = options or ViewOptions()
        t = self.translator
        source, target, found = t.attended(item, beam_size=options.beam)
        assert found.attention is not None  # attended() asks for it
        weights = with_source_eos(found.attention, len(source))  # (T, S)
        rows = t.target_tokenizer.pieces([*target, EOS_ID] if found.ended else target)
        columns = t.source_tokenizer.pieces([*source, EOS_ID])
        view = TokenView("cross", self.title, rows, columns, [weights[None]], self_attention=False)
        text = t.target_tokenizer.decode(target)
        views: list[TokenView | ImageView] = [view]
        return Seen({"summary": text, "text": text}, views, subject="the translation")
