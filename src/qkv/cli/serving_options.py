"""The options of the commands that run a model for its outputs (``translate``, ``generate``,
``serve``): the precision of its weights and the engine that runs it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from qkv.ctranslate2 import compute_type as compute_type  # --precision as CTranslate2's type

if TYPE_CHECKING:
    from qkv.layers.packed_linear import Precision

# qkv.layers.packed_linear.PRECISIONS, spelled out so that parsing imports no torch
# (tests/cli/test_serving_options.py checks that they agree).
PRECISION_CHOICES = ("float32", "bfloat16", "int8")


def add_precision(parser: argparse.ArgumentParser, *, bf16_alias: bool = False) -> None:
    """``--precision {float32,bfloat16,int8}`` (and ``--bf16``, its older spelling)."""
    parser.add_argument(
        "--precision",
        choices=PRECISION_CHOICES,
        default=None,
        help="weights of the decode steps: float32 (default: the same outputs as the model's "
        "forward pass), bfloat16 (half the bytes) or int8 (int8 weights by int8 activations, a "
        "quarter of the bytes); the lower "
        "two are faster and may pick another token where two are nearly tied",
    )
    if bf16_alias:
        parser.add_argument("--bf16", action="store_true", help="the same as --precision bfloat16")


def chosen_precision(args: argparse.Namespace) -> Precision | None:
    """The precision asked for (``None``: the default, float32); ``--bf16`` with another
    ``--precision`` is an error."""
    precision: Precision | None = args.precision  # one of PRECISION_CHOICES, or None
    if getattr(args, "bf16", False):
        if precision not in (None, "bfloat16"):
            raise ValueError(f"--bf16 contradicts --precision {precision}; pass one of them")
        precision = "bfloat16"
    return precision


ENGINES = ("qkv", "ctranslate2")


def add_engine(parser: argparse.ArgumentParser, *, models: str = "--model is") -> None:
    """``--engine {qkv,ctranslate2}``; ``models`` names the model options it applies to (a
    command with several: ``"every --model is"``)."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="qkv",
        help=f"qkv (default) or ctranslate2: {models} then a directory written by qkv export "
        "--format ctranslate2 (needs pip install 'qkv[ctranslate2]'), and --precision picks "
        "CTranslate2's compute type (default: the type the export stored)",
    )
