"""The steps every Hugging Face importer of :mod:`qkv.interop` takes around its own mapping of
names: a config's options that qkv does not implement refused by name and its activation mapped,
the weights of a live ``transformers`` model read, the mapped tensor names checked, and the
tensors loaded into the qkv model once their shapes are. Each importer passes its exception
class and its family's name (``"BERT"``, ``"ViT"``), which every message names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from torch import Tensor, nn

ModelT = TypeVar("ModelT", bound=nn.Module)


def checked_activation(
    hf: Mapping[str, Any],
    unsupported: Mapping[str, Any],
    activations: Mapping[str, str],
    family: str,
    error: type[Exception],
    *,
    key: str = "hidden_act",
    default: str = "gelu",
) -> str:
    """qkv's name (by ``activations``) for the activation a config names under ``key``
    (``default`` when it names none), once the config is checked: one that sets an option of
    ``unsupported`` to anything but its value there, or names an activation ``activations``
    lacks, is refused."""
    for option, expected in unsupported.items():
        if option in hf and hf[option] != expected:
            raise error(
                f"{family} config {option}={hf[option]!r} is not supported (only {expected!r})"
            )
    activation = hf.get(key, default)
    if activation not in activations:
        raise error(
            f"{family} config {key}={activation!r} is not supported; known: "
            f"{', '.join(activations)}"
        )
    return activations[activation]


def live_weights(hf_model: Any) -> dict[str, Tensor]:
    """The state dict of a live ``transformers`` model, detached from its graph, as float32."""
    return {k: v.detach().float() for k, v in hf_model.state_dict().items()}


def check_names(
    missing: list[str], unexpected: list[str], family: str, error: type[Exception], hint: str
) -> None:
    """Refuse weights that lack tensors the mapping needs, then weights that hold tensors it does
    not know (``hint`` says what they may be), each list named in full."""
    if missing:
        raise error(f"{family} weights lack {len(missing)} tensor(s): {', '.join(missing)}")
    if unexpected:
        raise error(
            f"unexpected tensor(s) in the {family} weights ({hint}): {', '.join(unexpected)}"
        )


def load_checked(
    model: ModelT, state: Mapping[str, Tensor], family: str, error: type[Exception]
) -> ModelT:
    """``model`` holding ``state`` (every tensor of it, ``strict``), in eval mode; a tensor whose
    shape is not the one the model's config gives it is refused with both shapes named."""
    expected = model.state_dict()
    for key, tensor in state.items():
        if tensor.shape != expected[key].shape:
            raise error(
                f"{key}: {family} weight of shape {tuple(tensor.shape)}, the config needs "
                f"{tuple(expected[key].shape)}"
            )
    model.load_state_dict(state, strict=True)
    return model.eval()
