"""A linear-chain conditional random field over tags: Lafferty, McCallum, Pereira 2001, as the
output layer of Lample et al. 2016, "Neural Architectures for Named Entity Recognition", eq. (1):

    score(y) = start[y_1] + sum_i emissions[i, y_i] + sum_i transitions[y_{i-1}, y_i] + end[y_n]
    p(y | x) = exp(score(y)) / Z,      Z = sum_y' exp(score(y'))

Shape letters here: ``B`` batch, ``W`` words (one tag each), ``K`` tags. ``keep (B, W)`` is
``True`` at real words (qkv's mask convention), real words first; every row has at least one.

* :meth:`LinearChainCRF.nll` is the training loss, ``log Z - score(gold)`` per sentence; ``log Z``
  comes from the forward algorithm (:meth:`LinearChainCRF.log_partition`, a log-sum-exp recursion).
* :meth:`LinearChainCRF.decode` is Viterbi (a max-plus recursion and backpointers).
* :class:`TransitionRules` says which tag may follow which, and which may open or close a
  sentence; :func:`bio_transitions` builds them for BIO (IOB2) tags. Training ignores the rules
  (the learned transitions soon make invalid moves unlikely; AllenNLP and Lample et al. train
  so too); constrained decoding makes them impossible, so the output is always valid BIO.
* :func:`constrained_decode` applies the same rules to a softmax tagger: Viterbi over per-word
  log-probabilities with zero transition scores.

Both recursions run in at least float32 whatever the emissions' dtype (bf16 and fp16 sums drift);
scores come back in that dtype. Padded positions never count: their emissions are replaced by
zeros before anything else (``torch.where``, so NaN or inf there cannot leak, not even into
gradients), and the recursions carry each row's state unchanged past its last word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qkv.attention.masks import check_keep

__all__ = ["LinearChainCRF", "TransitionRules", "bio_transitions", "constrained_decode"]


@dataclass(frozen=True, eq=False)
class TransitionRules:
    """Which tag sequences are valid. ``True`` = allowed.

    Attributes:
        allowed: ``(K, K)`` bool; ``allowed[i, j]`` is ``True`` when tag ``j`` may follow tag ``i``.
        start: ``(K,)`` bool; the tag may open a sentence.
        end: ``(K,)`` bool; the tag may close a sentence.
    """

    allowed: Tensor
    start: Tensor
    end: Tensor

    def __post_init__(self) -> None:
        for name in ("allowed", "start", "end"):
            value = getattr(self, name)
            if not isinstance(value, Tensor) or value.dtype != torch.bool:
                kind = value.dtype if isinstance(value, Tensor) else type(value).__name__
                raise ValueError(f"TransitionRules.{name} must be a bool tensor, got {kind}")
        k = self.allowed.shape[0] if self.allowed.dim() == 2 else -1
        if k < 1 or self.allowed.shape != (k, k):
            raise ValueError(
                f"TransitionRules.allowed must be a square (K, K) tensor with K >= 1, "
                f"got shape {tuple(self.allowed.shape)}"
            )
        if self.start.shape != (k,) or self.end.shape != (k,):
            raise ValueError(
                f"TransitionRules.start and .end must be (K,) = ({k},) to match allowed, got "
                f"{tuple(self.start.shape)} and {tuple(self.end.shape)}"
            )

    @property
    def num_tags(self) -> int:
        """``K``."""
        return self.allowed.shape[0]

    @classmethod
    def unconstrained(cls, num_tags: int) -> TransitionRules:
        """Every transition, start and end allowed."""
        if not isinstance(num_tags, int) or isinstance(num_tags, bool) or num_tags < 1:
            raise ValueError(f"num_tags must be a positive int, got {num_tags!r}")
        ones = torch.ones(num_tags, dtype=torch.bool)
        return cls(torch.ones(num_tags, num_tags, dtype=torch.bool), ones, ones.clone())


def _bio_parts(tag: str) -> tuple[str, str]:
    """``("O", "")``, ``("B", TYPE)`` or ``("I", TYPE)``; ``ValueError`` for anything else."""
    if tag == "O":
        return "O", ""
    prefix, dash, kind = tag.partition("-") if isinstance(tag, str) else ("", "", "")
    if prefix not in ("B", "I") or not dash or not kind:
        raise ValueError(
            f"{tag!r} is not a BIO tag: BIO (IOB2) tags are O, B-TYPE and I-TYPE "
            "(for example 'B-PER', 'I-PER'); rename the tag set or pass "
            "TransitionRules.unconstrained(K)"
        )
    return prefix, kind


def bio_transitions(tags: Sequence[str]) -> TransitionRules:
    """The rules of BIO (IOB2) tagging for the tag names ``tags`` (tag id ``i`` is ``tags[i]``).

    ``I-X`` may only follow ``B-X`` or ``I-X`` and may not open a sentence; every other move is
    allowed, and every tag may close a sentence.
    """
    if isinstance(tags, str) or len(tags) == 0:
        raise ValueError(f"tags must be a non-empty sequence of tag names, got {tags!r}")
    parts = [_bio_parts(tag) for tag in tags]
    seen: set[str] = set()
    for tag in tags:
        if tag in seen:
            raise ValueError(f"tag {tag!r} appears twice in tags; pass each tag name once")
        seen.add(tag)
    k = len(tags)
    allowed = torch.ones(k, k, dtype=torch.bool)
    start = torch.ones(k, dtype=torch.bool)
    for j, (prefix, kind) in enumerate(parts):
        if prefix == "I":
            start[j] = False
            for i, (before, before_kind) in enumerate(parts):
                allowed[i, j] = before in ("B", "I") and before_kind == kind
    return TransitionRules(allowed, start, torch.ones(k, dtype=torch.bool))


def _check_inputs(
    emissions: Tensor,
    keep: Tensor,
    num_tags: int,
    name: str = "emissions",
    k_name: str = "num_tags",
) -> Tensor:
    """Validate ``emissions (B, W, K)`` and ``keep (B, W)``; return the lengths ``(B,)``."""
    if not isinstance(emissions, Tensor) or emissions.dim() != 3:
        shape = tuple(emissions.shape) if isinstance(emissions, Tensor) else type(emissions)
        raise ValueError(f"{name} must be a (B, W, K) tensor, got {shape}")
    if not emissions.dtype.is_floating_point:
        raise ValueError(f"{name} must be floating point, got {emissions.dtype}: pass .float()")
    b, w, k = emissions.shape
    if k != num_tags:
        raise ValueError(
            f"{name} must be (B, W, K) with K = {k_name} = {num_tags}, got shape {(b, w, k)}"
        )
    if w == 0:
        raise ValueError(f"{name} has W = 0 positions (shape {(b, w, k)}): pass at least one word")
    check_keep(keep, "keep")
    if keep.shape != (b, w):
        raise ValueError(
            f"keep must be a bool (B, W) = {(b, w)} tensor (True = real word), got shape "
            f"{tuple(keep.shape)}"
        )
    empty = (~keep[:, 0]).nonzero()
    if len(empty):
        row = int(empty[0, 0])
        raise ValueError(
            f"row {row} of keep has no real word at position 0 (keep[{row}, 0] is False): "
            "every sentence needs at least one word, real words first; drop empty sentences"
        )
    gaps = (keep[:, 1:] & ~keep[:, :-1]).any(dim=1).nonzero()
    if len(gaps):
        row = int(gaps[0, 0])
        raise ValueError(
            f"row {row} of keep has a real word after padding ({keep[row].int().tolist()}): "
            "pad on the right, real words first"
        )
    return keep.sum(dim=1)  # (B,)


def _work_dtype(*tensors: Tensor) -> torch.dtype:
    """The widest dtype of ``tensors``, and at least float32."""
    dtype = torch.float32
    for tensor in tensors:
        dtype = torch.promote_types(dtype, tensor.dtype)
    return dtype


def _viterbi(
    emissions: Tensor,
    keep: Tensor,
    transitions: Tensor,
    start: Tensor,
    end: Tensor,
    rules: TransitionRules | None,
) -> tuple[Tensor, Tensor]:
    """The best tag sequence of every row: ``(B, W)`` long paths (0 at padding) and ``(B,)``
    scores. Inputs are already checked; ``rules`` (or ``None``) rules out disallowed moves.

    No fill value stands in for a disallowed move: a boolean ``reach`` (a path allowed so far
    ends in the tag) travels with the scores, a candidate is scored only where the move is
    allowed from a reachable tag, and the rest hold the dtype's own minimum, which is never added
    to (so it cannot overflow). A row with no allowed path, or whose every allowed path has a
    ``-inf`` emission, raises.
    """
    lengths = keep.sum(dim=1)  # (B,)
    dtype = _work_dtype(emissions, transitions)
    em = torch.where(keep[..., None], emissions.to(dtype), 0.0)  # (B, W, K)
    trans, start, end = transitions.to(dtype), start.to(dtype), end.to(dtype)
    b, w, k = em.shape
    low = torch.finfo(dtype).min
    if rules is None:
        rules = TransitionRules.unconstrained(k)
    device = em.device
    allowed = rules.allowed.to(device)  # (K, K)
    reach = rules.start.to(device).expand(b, k)  # (B, K)
    best = torch.where(
        reach, start + em[:, 0], low
    )  # (B, K): best score of a path ending in each tag
    backpointers = []  # backpointers[i - 1][b, j]: best tag at i - 1 given tag j at i
    for i in range(1, w):
        moves = reach[:, :, None] & allowed  # (B, K_prev, K)
        candidates = torch.where(moves, best[:, :, None] + trans, low)  # (B, K_prev, K)
        step, previous = candidates.max(dim=1)  # (B, K), (B, K)
        arrived = moves.any(dim=1)  # (B, K)
        here = keep[:, i, None]  # (B, 1)
        best = torch.where(here, torch.where(arrived, step + em[:, i], low), best)  # (B, K)
        reach = torch.where(here, arrived, reach)
        backpointers.append(previous)
    ending = reach & rules.end.to(device)  # (B, K)
    scores, last = torch.where(ending, best + end, low).max(dim=1)  # (B,), (B,)
    impossible = (~ending.any(dim=1) | torch.isneginf(scores)).nonzero()
    if len(impossible):
        row = int(impossible[0, 0])
        raise ValueError(
            f"no tag sequence of row {row} (length {int(lengths[row])}) has a finite score: the "
            "rules allow none (check which tags may start, follow and end), or its emissions are "
            "-inf at every allowed tag"
        )
    paths = torch.zeros(b, w, dtype=torch.long, device=em.device)  # (B, W)
    tag = last  # (B,): the tag at position i, valid for rows with i <= length - 1
    for i in range(w - 1, -1, -1):
        tag = torch.where(lengths - 1 == i, last, tag)
        paths[:, i] = torch.where(keep[:, i], tag, 0)
        if i > 0:
            tag = backpointers[i - 1].gather(1, tag[:, None]).squeeze(1)  # (B,)
    return paths, scores


def _to_lists(paths: Tensor, keep: Tensor) -> list[list[int]]:
    return [row[:n] for row, n in zip(paths.tolist(), keep.sum(dim=1).tolist(), strict=True)]


def constrained_decode(log_probs: Tensor, keep: Tensor, rules: TransitionRules) -> list[list[int]]:
    """The valid tag sequence with the highest ``sum_i log_probs[i, y_i]``, for a softmax tagger.

    Viterbi with zero transition, start and end scores and ``rules`` enforced, so a softmax tagger
    too yields only valid BIO. Pass ``logits.log_softmax(-1)``: with raw logits the sum is not the
    sequence's log-probability.

    Shape:
        log_probs: ``(B, W, K)``; keep: ``(B, W)`` bool. Returns ``B`` lists of each row's length.
    """
    if not isinstance(rules, TransitionRules):
        raise ValueError(
            f"rules must be a TransitionRules (bio_transitions(tags) or "
            f"TransitionRules.unconstrained(K)), got {type(rules).__name__}"
        )
    _check_inputs(log_probs, keep, rules.num_tags, "log_probs", "rules.num_tags")
    k = rules.num_tags
    zeros = log_probs.new_zeros(k)
    paths, _ = _viterbi(log_probs, keep, log_probs.new_zeros(k, k), zeros, zeros, rules)
    return _to_lists(paths, keep)


class LinearChainCRF(nn.Module):
    """Learned transition, start and end scores over ``K`` tags, and the CRF's loss and decoding.

    The scores start at zero: the model then begins as the per-word softmax tagger under it (with
    zero transitions ``log Z`` factorises and :meth:`nll` is the sum of per-word cross-entropies),
    so adding a CRF does not change the initial loss, and the gradient (gold transition counts
    minus expected counts) moves them off zero from the first step. ``rules`` (default: none) only
    restrict :meth:`decode`; they are non-persistent buffers, rebuilt from the tag set.

    Shape:
        emissions: ``(B, W, K)``, float; tags: ``(B, W)`` long, in ``[0, K)`` at real words (any
        value at padding, ``-100`` included); keep: ``(B, W)`` bool, real words first.
    """

    allowed: Tensor  # buffers, registered in __init__
    allowed_start: Tensor
    allowed_end: Tensor

    def __init__(self, num_tags: int, rules: TransitionRules | None = None) -> None:
        super().__init__()
        if not isinstance(num_tags, int) or isinstance(num_tags, bool) or num_tags < 1:
            raise ValueError(f"num_tags must be a positive int, got {num_tags!r}")
        if rules is None:
            rules = TransitionRules.unconstrained(num_tags)
        if not isinstance(rules, TransitionRules) or rules.num_tags != num_tags:
            got = rules.num_tags if isinstance(rules, TransitionRules) else type(rules).__name__
            raise ValueError(
                f"rules must be TransitionRules for num_tags = {num_tags} tags, got {got}: pass "
                "bio_transitions(tags) for the same tag list, or None"
            )
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.zeros(num_tags, num_tags))  # [from, to]
        self.start = nn.Parameter(torch.zeros(num_tags))
        self.end = nn.Parameter(torch.zeros(num_tags))
        self.register_buffer("allowed", rules.allowed.clone(), persistent=False)
        self.register_buffer("allowed_start", rules.start.clone(), persistent=False)
        self.register_buffer("allowed_end", rules.end.clone(), persistent=False)

    @property
    def rules(self) -> TransitionRules:
        """The rules that constrained decoding enforces."""
        return TransitionRules(self.allowed, self.allowed_start, self.allowed_end)

    def extra_repr(self) -> str:
        constrained = not (
            self.allowed.all() and self.allowed_start.all() and self.allowed_end.all()
        )
        return f"num_tags={self.num_tags}, constrained_rules={constrained}"

    def _parameters_as(self, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
        return self.transitions.to(dtype), self.start.to(dtype), self.end.to(dtype)

    def log_partition(self, emissions: Tensor, keep: Tensor) -> Tensor:
        """``log Z`` per sentence by the forward algorithm (rules not applied). ``(B,)``."""
        _check_inputs(emissions, keep, self.num_tags)
        dtype = _work_dtype(emissions, self.transitions)
        em = torch.where(keep[..., None], emissions.to(dtype), 0.0)  # (B, W, K)
        trans, start, end = self._parameters_as(dtype)
        alpha = start + em[:, 0]  # (B, K): log-sum of the scores of paths ending in each tag
        for i in range(1, em.shape[1]):
            step = torch.logsumexp(alpha[:, :, None] + trans, dim=1) + em[:, i]  # (B, K)
            alpha = torch.where(keep[:, i, None], step, alpha)
        return torch.logsumexp(alpha + end, dim=1)  # (B,)

    def score(self, emissions: Tensor, tags: Tensor, keep: Tensor) -> Tensor:
        """``score(y)`` of the tag sequences ``tags`` over each row's real words. ``(B,)``."""
        lengths = _check_inputs(emissions, keep, self.num_tags)
        if not isinstance(tags, Tensor) or tags.dtype != torch.long:
            kind = tags.dtype if isinstance(tags, Tensor) else type(tags).__name__
            raise ValueError(f"tags must be a torch.long tensor, got {kind}: pass tags.long()")
        if tags.shape != keep.shape:
            raise ValueError(
                f"tags must be (B, W) = {tuple(keep.shape)} like keep, got {tuple(tags.shape)}"
            )
        bad = (keep & ((tags < 0) | (tags >= self.num_tags))).nonzero()
        if len(bad):
            row, col = (int(v) for v in bad[0])
            raise ValueError(
                f"tags[{row}, {col}] = {int(tags[row, col])} at a real word is outside "
                f"[0, K) = [0, {self.num_tags}): pass tag ids in range"
            )
        tags = torch.where(keep, tags, 0)  # (B, W): padding may hold -100
        dtype = _work_dtype(emissions, self.transitions)
        em = torch.where(keep[..., None], emissions.to(dtype), 0.0)  # (B, W, K)
        trans, start, end = self._parameters_as(dtype)
        words = em.gather(2, tags[..., None]).squeeze(2).sum(dim=1)  # (B,); padding is 0
        moves = torch.where(keep[:, 1:], trans[tags[:, :-1], tags[:, 1:]], 0.0).sum(dim=1)  # (B,)
        last = tags.gather(1, (lengths - 1)[:, None]).squeeze(1)  # (B,)
        return start[tags[:, 0]] + words + moves + end[last]

    def nll(self, emissions: Tensor, tags: Tensor, keep: Tensor) -> Tensor:
        """``-log p(tags | emissions) = log Z - score(tags)``, the loss per sentence. ``(B,)``.

        Average or sum it over the batch as the training loop prefers."""
        return self.log_partition(emissions, keep) - self.score(emissions, tags, keep)

    def viterbi(
        self,
        emissions: Tensor,
        keep: Tensor,
        *,
        constrained: bool = True,
        rules: TransitionRules | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The best tag sequence per row: ``(B, W)`` long paths (0 at padding) and their ``(B,)``
        scores. With ``constrained`` the rules' disallowed moves are impossible: ``rules`` when
        given (a tagger's, rebuilt from its tag list), else the module's."""
        _check_inputs(emissions, keep, self.num_tags)
        if rules is not None and rules.num_tags != self.num_tags:
            raise ValueError(
                f"rules are for {rules.num_tags} tags, this CRF scores {self.num_tags}: pass "
                "bio_transitions(tags) of the model's own tag list"
            )
        chosen = (rules if rules is not None else self.rules) if constrained else None
        return _viterbi(emissions, keep, self.transitions, self.start, self.end, chosen)

    def decode(
        self,
        emissions: Tensor,
        keep: Tensor,
        *,
        constrained: bool = True,
        rules: TransitionRules | None = None,
    ) -> list[list[int]]:
        """Each row's best tag sequence (Viterbi) as a list of its real length (arguments as
        :meth:`viterbi`)."""
        with torch.no_grad():
            paths, _ = self.viterbi(emissions, keep, constrained=constrained, rules=rules)
        return _to_lists(paths, keep)
