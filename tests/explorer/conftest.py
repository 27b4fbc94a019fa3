"""The explorer's small trained models, trained once per test run and shared by every module
and worker that uses them (:func:`tests.explorer.models.explorer_models`)."""

import pytest

from tests.explorer.models import explorer_models


@pytest.fixture(scope="session")
def explorer_dirs(tmp_path_factory):
    """A model directory of every kind the explorer shows (:data:`.models.KINDS`), by kind."""
    return explorer_models(tmp_path_factory)
