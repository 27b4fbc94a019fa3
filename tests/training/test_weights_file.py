"""The weights file: tied tensors stored once and tied again on load; weights that are views of
one flat buffer (an LSTM's on a GPU, where cuDNN packs them) saved whole. The flat buffer is made
here on the CPU, the same storage layout cuDNN leaves, so CI checks what the GPU run hit."""

import pytest
import torch
from safetensors import safe_open
from torch import nn

from qkv.training.checkpoint import CheckpointError, load_weights, save_weights, weights_to_save


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 3)
        self.out = nn.Linear(3, 5, bias=False)
        self.out.weight = self.embed.weight  # tied, as share_embeddings/tie_output do


class Flat(nn.Module):
    """Two weights that are views of one buffer, neither covering all of it."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        flat = torch.randn(10, generator=torch.Generator().manual_seed(seed))
        self.a = nn.Parameter(flat[:4].view(2, 2))
        self.b = nn.Parameter(flat[4:].view(2, 3))


def stored_names(path):
    with safe_open(str(path), framework="pt") as handle:
        return sorted(handle.keys()), handle.metadata()


def test_tied_weights_are_stored_once_and_tied_again(tmp_path):
    torch.manual_seed(0)
    model = Tied()
    save_weights(model, tmp_path / "w.safetensors")
    names, metadata = stored_names(tmp_path / "w.safetensors")
    assert names == ["embed.weight"]  # the alphabetically first name of the tied pair
    assert metadata == {"out.weight": "embed.weight"}
    fresh = Tied()
    load_weights(fresh, tmp_path / "w.safetensors")
    assert torch.equal(fresh.embed.weight, model.embed.weight)
    assert fresh.out.weight is fresh.embed.weight  # still one tensor


def test_views_of_one_flat_buffer_are_saved_whole_and_loaded_back(tmp_path):
    model = Flat(seed=1)
    assert model.a.untyped_storage().data_ptr() == model.b.untyped_storage().data_ptr()
    tensors, tied = weights_to_save(model)
    assert tied == {}
    assert tensors["a"].untyped_storage().data_ptr() != tensors["b"].untyped_storage().data_ptr()
    save_weights(model, tmp_path / "w.safetensors")
    assert stored_names(tmp_path / "w.safetensors")[0] == ["a", "b"]
    fresh = Flat(seed=2)
    load_weights(fresh, tmp_path / "w.safetensors")
    assert torch.equal(fresh.a, model.a) and torch.equal(fresh.b, model.b)
    # Loading wrote into the views: the flat buffer behind them holds the saved values.
    assert fresh.a.untyped_storage().data_ptr() == fresh.b.untyped_storage().data_ptr()


def test_a_file_without_a_weight_is_refused_naming_it(tmp_path):
    save_weights(nn.Linear(3, 2, bias=False), tmp_path / "w.safetensors")
    with pytest.raises(CheckpointError, match=r"missing \['bias'\]"):
        load_weights(nn.Linear(3, 2), tmp_path / "w.safetensors")


def test_a_file_holding_both_names_of_a_tied_pair_is_refused(tmp_path):
    from safetensors.torch import save_file

    weight = torch.randn(5, 3)
    save_file({"embed.weight": weight, "out.weight": weight.clone()}, tmp_path / "w.safetensors")
    with pytest.raises(CheckpointError, match=r"unexpected \['out.weight'\]"):
        load_weights(Tied(), tmp_path / "w.safetensors")


def test_an_untied_model_reads_a_tied_file_as_missing_a_weight(tmp_path):
    save_weights(Tied(), tmp_path / "w.safetensors")
    untied = Tied()
    untied.out.weight = nn.Parameter(torch.zeros(5, 3))
    with pytest.raises(CheckpointError, match=r"missing \['out.weight'\]"):
        load_weights(untied, tmp_path / "w.safetensors")
