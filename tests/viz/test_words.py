"""Merging subword attention into words: a case worked out by hand, the piece markers of qkv's BPE
(``▁``), WordPiece (``##``) and subword-nmt (``</w>``), rows still summing to 1, the identity
grouping as a no-op, and a loop reference over random groupings (hypothesis)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from qkv.viz.words import merge_word_attention, word_groups

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_case_worked_by_hand():
    # pieces: ▁mon de ▁chat; words: "monde" = {0, 1}, "chat" = {2}
    a = torch.tensor(
        [
            [0.5, 0.3, 0.2],
            [0.1, 0.1, 0.8],
            [0.6, 0.0, 0.4],
        ]
    )
    # row "monde": mean of rows 0 and 1 -> [.3, .2, .5]; columns summed: [.3 + .2, .5] = [.5, .5]
    # row "chat": row 2, columns summed: [.6 + 0, .4] = [.6, .4]
    merged = merge_word_attention(a, ["▁mon", "de", "▁chat"], ["▁mon", "de", "▁chat"])
    torch.testing.assert_close(merged.weights, torch.tensor([[0.5, 0.5], [0.6, 0.4]]))
    assert merged.query_words == merged.key_words == ["monde", "chat"]


def test_the_markers_of_each_tokenizer():
    bpe = ["<s>", "▁le", "▁mon", "de", ".", "</s>", "<pad>"]
    assert word_groups(bpe) == [0, 1, 2, 2, 2, 3, 4]
    wordpiece = ["[CLS]", "the", "play", "##ing", "##s", "[SEP]"]
    assert word_groups(wordpiece, "##") == [0, 1, 2, 2, 2, 3]
    nmt = ["le</w>", "mon", "de</w>", "chat</w>", "</s>"]
    assert word_groups(nmt, "</w>") == [0, 1, 1, 2, 3]
    # a piece without its marker right after a special token still starts a word
    assert word_groups(["<s>", "mon", "de"]) == [0, 1, 1]
    w = torch.full((6, 6), 1 / 6)
    merged = merge_word_attention(w, wordpiece, wordpiece, marker="##")
    assert merged.key_words == ["[CLS]", "the", "playings", "[SEP]"]
    with pytest.raises(ValueError, match=r"marker must be one of '▁', '##', '</w>', got 'Ġ'"):
        word_groups(bpe, "Ġ")


def test_hiding_special_tokens_with_and_without_renormalising():
    tokens = ["<s>", "▁a", "b", "</s>"]
    a = torch.tensor(
        [
            [0.7, 0.1, 0.1, 0.1],
            [0.4, 0.2, 0.2, 0.2],
            [0.0, 0.4, 0.4, 0.2],
            [0.1, 0.1, 0.1, 0.7],
        ]
    )
    shown = merge_word_attention(a, tokens, tokens, hide_special=True)
    # word "ab" = rows 1, 2 averaged, columns 1 + 2: (.4 + .8) / 2 = .6; the .4 given to <s> and
    # </s> is left out, not spread over the words shown
    torch.testing.assert_close(shown.weights, torch.tensor([[0.6]]))
    assert shown.query_words == shown.key_words == ["ab"]
    again = merge_word_attention(a, tokens, tokens, hide_special=True, renormalise=True)
    torch.testing.assert_close(again.weights, torch.tensor([[1.0]]))
    with pytest.raises(ValueError, match="renormalise applies with hide_special=True only"):
        merge_word_attention(a, tokens, tokens, renormalise=True)


def test_identity_grouping_is_a_no_op_and_heads_are_kept():
    torch.manual_seed(0)
    a = torch.randn(3, 4, 5).softmax(-1)  # (H, Tq, Tk)
    merged = merge_word_attention(
        a, list("abcd"), list("vwxyz"), query_groups=range(4), key_groups=range(5)
    )
    torch.testing.assert_close(merged.weights, a, atol=0, rtol=0)
    assert merged.query_words == list("abcd")


def _reference(a: torch.Tensor, q_groups: list[int], k_groups: list[int]) -> torch.Tensor:
    wq, wk = max(q_groups) + 1, max(k_groups) + 1
    out = torch.zeros((*a.shape[:-2], wq, wk), dtype=torch.float64)
    for qw in range(wq):
        rows = [i for i, g in enumerate(q_groups) if g == qw]
        for kw in range(wk):
            cols = [j for j, g in enumerate(k_groups) if g == kw]
            out[..., qw, kw] = sum(a[..., i, j].double() for i in rows for j in cols) / len(rows)
    return out


def _grouping(draw: st.DrawFn, length: int) -> list[int]:
    labels = draw(st.lists(st.integers(0, length - 1), min_size=length, max_size=length))
    order = {label: index for index, label in enumerate(dict.fromkeys(labels))}
    return [order[label] for label in labels]  # every word index 0 .. W - 1 used


@st.composite
def _cases(draw: st.DrawFn) -> tuple[torch.Tensor, list[int], list[int]]:
    tq, tk, heads = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    a = torch.randn(heads, tq, tk, generator=torch.Generator().manual_seed(seed)).softmax(-1)
    return a, _grouping(draw, tq), _grouping(draw, tk)


@settings(max_examples=60, deadline=None)
@given(_cases())
def test_random_groupings_match_a_loop_and_keep_rows_summing_to_one(case):
    a, q_groups, k_groups = case
    merged = merge_word_attention(
        a,
        ["x"] * a.size(1),
        ["y"] * a.size(2),
        query_groups=q_groups,
        key_groups=k_groups,
    )
    torch.testing.assert_close(merged.weights.double(), _reference(a, q_groups, k_groups))
    torch.testing.assert_close(merged.weights.sum(-1), torch.ones(merged.weights.shape[:-1]))


def test_bad_inputs_are_named():
    a = torch.full((3, 3), 1 / 3)
    tokens = ["▁a", "b", "▁c"]
    with pytest.raises(ValueError, match=r"2 key tokens for 3 key positions"):
        merge_word_attention(a, tokens, tokens[:2])
    with pytest.raises(ValueError, match=r"query_groups has 2 entries for 3 query tokens"):
        merge_word_attention(a, tokens, tokens, query_groups=[0, 1])
    with pytest.raises(
        ValueError, match=r"using every index, got \[0, 2, 2\] \(no token in word 1\)"
    ):
        merge_word_attention(a, tokens, tokens, key_groups=[0, 2, 2])
    with pytest.raises(ValueError, match=r"shape \(3,\) and dtype torch.float32"):
        merge_word_attention(torch.ones(3), tokens, tokens)
    with pytest.raises(ValueError, match=r"dtype torch.int64"):
        merge_word_attention(torch.ones(3, 3, dtype=torch.long), tokens, tokens)


def test_a_token_view_holds_its_words_and_special_tokens_only_where_there_are_some():
    from qkv.viz.view_json import token_view

    target = ["<s>", "▁le", "▁ch", "at", "</s>"]  # marked: ch + at is one word
    source = ["the", "cat"]  # no marker: each piece a word
    weights = torch.softmax(torch.randn(2, 5, 2, generator=torch.Generator().manual_seed(0)), -1)
    view = token_view("x", "x", target, source, [weights], self_attention=False)
    assert view["special_queries"] == [0, 4] and view["special_keys"] == []
    words = view["words"]
    expected = merge_word_attention(weights, target, source, key_groups=[0, 1])
    assert words["queries"] == ["<s>", "le", "chat", "</s>"] == expected.query_words
    assert words["keys"] == source and words["special_queries"] == [0, 3]
    torch.testing.assert_close(
        torch.tensor(words["layers"][0], dtype=torch.float64),
        expected.weights.double(),
        atol=5.1e-5,
        rtol=0,
    )
    plain = token_view("y", "y", source, source, [weights[:, :2]], self_attention=True)
    assert "words" not in plain and "special_queries" not in plain
