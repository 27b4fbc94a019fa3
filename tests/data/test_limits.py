"""The data loaders' limits: a field over MAX_FIELD_CHARS in any text file (TSV pairs, aligned
files, labelled CSV/TSV, word/TAG and CoNLL) is refused with its file and line before it reaches
a tokenizer; a field of exactly the limit passes; image sizes and vocabulary sizes have a range;
a tokenizer with another model's vocabulary is named with both sizes."""

from __future__ import annotations

import importlib.util
import re

import pytest

from qkv.data.errors import MAX_FIELD_CHARS, DataError
from qkv.data.labelled.sentiment import read_labelled_file
from qkv.data.labelled.tagged import read_conll, read_word_tag
from qkv.data.pairs.parallel import read_aligned_files, read_tsv_pairs
from qkv.data.tokens.chars import FORMAT, CharTokenizer, is_char_vocabulary
from qkv.data.tokens.subword import MAX_VOCAB_SIZE, SubwordTokenizer, check_vocab_size

OVER = "x" * (MAX_FIELD_CHARS + 1)
UNDER = "x" * (MAX_FIELD_CHARS - 10)  # a line's tab and tag included, still within the limit


@pytest.mark.parametrize(
    ("name", "template", "read", "line"),
    [
        ("pairs.tsv", "a\tb\n{}\tc\n", read_tsv_pairs, 2),
        ("reviews.tsv", "text\tlabel\nfine\tpos\n{}\tneg\n", read_labelled_file, 3),
        ("reviews.csv", 'text,label\n"{}",neg\n', read_labelled_file, 2),
        ("tagged.txt", "a/DT b/NN\n{}/NN\n", read_word_tag, 2),
        ("tagged.conll", "a\tDT\n\n{}\tNN\n", read_conll, 3),
    ],
    ids=["tsv-pairs", "labelled-tsv", "labelled-csv", "word-tag", "conll"],
)
def test_a_field_over_the_limit_is_refused_naming_file_and_line(tmp_path, name, template, read,
                                                                 line):  # fmt: skip
    """Line-based files measure the line; CSV/TSV files each field."""
    path = tmp_path / name
    path.write_text(template.format(OVER), encoding="utf-8")
    with pytest.raises(DataError) as error:
        read(path)
    assert re.search(rf"{re.escape(str(path))}:{line}: a text of 100,00\d characters, more than "
                     "the 100,000", str(error.value))  # fmt: skip
    path.write_text(template.format(UNDER), encoding="utf-8")
    assert read(path)


def test_a_field_past_the_csv_modules_own_limit_is_named(tmp_path):
    """Past 131,072 characters the csv module stops first; the error still names the line."""
    path = tmp_path / "reviews.tsv"
    path.write_text("text\tlabel\nfine\tpos\n" + "x" * 200_000 + "\tneg\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path}:3: not a readable row \(field larger"):
        read_labelled_file(path)


def test_aligned_files_name_the_long_line(tmp_path):
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("a\nb\n", encoding="utf-8")
    tgt.write_text(f"c\n{OVER}\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"{tgt}:2: a text of {MAX_FIELD_CHARS + 1:,}"):
        read_aligned_files(src, tgt)


@pytest.mark.skipif(importlib.util.find_spec("PIL") is None, reason="needs Pillow")
@pytest.mark.parametrize(
    ("size", "message"),
    [
        (100_000, "size must be between 1 and 4096 pixels a side (height, width), got 100000"),
        ((8, 0), "got (8, 0)"),
        ("32", "size must be an integer (a square) or [height, width] in pixels, got '32'"),
        (True, "got True"),
        ([8, 8, 3], "got [8, 8, 3]"),
        (8.5, "got 8.5"),
    ],
)
def test_image_folder_sizes_are_checked_before_reading(tmp_path, size, message):
    from PIL import Image

    from qkv.data.images.datasets import load_image_folder

    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        Image.new("L", (4, 4)).save(tmp_path / label / "0.png")
    with pytest.raises(DataError) as error:
        load_image_folder(tmp_path, size=size)
    assert message in str(error.value)
    assert load_image_folder(tmp_path, size=[6, 5]).image_shape == (1, 6, 5)


@pytest.mark.skipif(importlib.util.find_spec("PIL") is None, reason="needs Pillow")
def test_an_image_folder_too_large_for_memory_is_refused(tmp_path, monkeypatch):
    from PIL import Image

    from qkv.data.images import datasets as images

    for label in ("a", "b"):
        (tmp_path / label).mkdir()
        Image.new("RGB", (4, 4)).save(tmp_path / label / "0.png")
    monkeypatch.setattr(images, "memory_bytes", lambda: 1000)
    with pytest.raises(DataError, match=r"2 images of 16x16 pixels take 1\.5 KiB, more than"):
        images.load_image_folder(tmp_path, size=16)


def test_vocabulary_sizes_have_a_ceiling():
    with pytest.raises(ValueError, match=f"vocab_size={10**12} is too large: at most 1,000,000"):
        SubwordTokenizer.train(["a b c"], 10**12)
    assert MAX_VOCAB_SIZE == 1_000_000


def test_a_tokenizer_of_another_size_names_the_file_and_both_sizes(tmp_path):
    check_vocab_size(tmp_path / "tokenizer.json", 67, 67)
    with pytest.raises(DataError) as error:
        check_vocab_size(tmp_path / "tokenizer.json", 25, 67)
    assert f"{tmp_path / 'tokenizer.json'} has 25 ids but the model's vocabulary has 67" in str(
        error.value
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00".decode("latin-1"), "is not a readable character vocabulary"),
        (f'{{"format": "{FORMAT}", "chars": 5}}', "'chars' must be a list of characters"),
        (f'{{"format": "{FORMAT}", "chars": ["ab"]}}', "single characters only"),
    ],
)
def test_broken_character_vocabularies_name_the_file(tmp_path, content, message):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(DataError) as error:
        CharTokenizer.load(path)
    assert str(path) in str(error.value) and message in str(error.value)
    assert not is_char_vocabulary(tmp_path / "missing.json")


def test_strips_that_cannot_fit_in_memory_are_refused(monkeypatch):
    import torch

    from qkv.data.images import strips

    images, labels = torch.zeros(6, 1, 8, 8, dtype=torch.uint8), torch.arange(6)
    monkeypatch.setattr(strips, "memory_bytes", lambda: 10_000)
    drawn = strips.draw_strips(images, labels, 30, min_tiles=1, max_tiles=4, seed=0)
    assert drawn.tiles.shape == (30, 4, 1, 8, 8)  # 7,680 bytes
    with pytest.raises(DataError) as error:
        strips.draw_strips(images, labels, 40, min_tiles=1, max_tiles=4, seed=0)
    assert "40 train strips of up to 4 tiles of (1, 8, 8) take 10.0 KiB" in str(error.value)
    assert "lower data.train_strips or data.max_tiles" in str(error.value)
