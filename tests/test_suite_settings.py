"""The test suite's own settings: hypothesis runs without a deadline and repeatably, and a known
defect marked xfail fails the run once it is fixed (strict), so no fix passes unseen."""

from __future__ import annotations

from hypothesis import settings


def test_hypothesis_has_no_deadline_and_is_repeatable():
    assert settings.default.deadline is None  # a loaded machine cannot fail a property test
    assert settings.default.derandomize and settings.default.database is None


def test_every_xfail_is_strict(pytestconfig):
    assert pytestconfig.getini("xfail_strict") is True  # pyproject's [tool.pytest.ini_options]
    from tests.cli.test_hostile import case

    (mark,) = case("x", "train a.yaml", "m", xfail="a known defect").marks
    assert mark.name == "xfail" and mark.kwargs["strict"] is True
