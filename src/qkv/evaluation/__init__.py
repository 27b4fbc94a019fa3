"""Metrics and evaluation runs."""

from qkv.evaluation.classification import (
    LabelScores,
    accuracy,
    confusion_matrix,
    macro_f1,
    per_label_scores,
    token_accuracy,
)

__all__ = [
    "LabelScores",
    "accuracy",
    "confusion_matrix",
    "macro_f1",
    "per_label_scores",
    "token_accuracy",
]
