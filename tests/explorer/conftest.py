"""The explorer's small trained models, trained once per test session for the modules that
share them (the API's tests and its hostile-input tests)."""

import pytest
import torch

from tests.explorer.models import train_models


@pytest.fixture(scope="session")
def explorer_dirs(tmp_path_factory):
    """A model directory of every kind the explorer shows (:data:`.models.KINDS`), by kind;
    trained on one thread (a second only adds synchronisation to tensors this small)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train_models(tmp_path_factory.mktemp("explorer"))
    finally:
        torch.set_num_threads(before)
