"""The packaged run configurations (:mod:`qkv.presets`): names resolve to the files under
``src/qkv/configs``, a path is used as it is, an unknown name or a missing file is refused with a
message that says which and what to type instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qkv.presets import config_names, config_path, presets

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "src" / "qkv" / "configs"


def _on_disk() -> list[str]:
    return sorted(
        p.relative_to(CONFIGS).with_suffix("").as_posix() for p in CONFIGS.rglob("*.yaml")
    )


def test_the_repository_path_links_to_the_packaged_configs():
    link = ROOT / "configs"
    assert link.is_symlink() and os.readlink(link) == "src/qkv/configs"
    assert (link / "demo.yaml").read_bytes() == (CONFIGS / "demo.yaml").read_bytes()


def test_every_file_has_a_name_and_every_name_its_file():
    names = config_names()
    assert names == _on_disk()
    assert {"demo", "transformer", "tiny/reverse-transformer", "reading/cloze-as-reader"} <= set(
        names
    )
    for name in names:
        assert config_path(name).resolve() == (CONFIGS / f"{name}.yaml").resolve()


@pytest.mark.parametrize("suffix", ["", ".yaml", ".yml"])
def test_a_name_with_or_without_its_suffix(suffix, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing here: the package answers
    path = config_path(f"reading/cloze-as-reader{suffix}")
    assert path.resolve() == (CONFIGS / "reading" / "cloze-as-reader.yaml").resolve()


def test_an_existing_path_is_used_as_it_is(tmp_path, monkeypatch):
    mine = tmp_path / "demo.yaml"  # the same name as a packaged config: the file wins
    mine.write_text("name: mine\n", encoding="utf-8")
    assert config_path(str(mine)) == mine
    monkeypatch.chdir(tmp_path)
    assert config_path("demo.yaml") == Path("demo.yaml")
    assert config_path("./demo.yaml") == Path("demo.yaml")


def test_an_unknown_name_names_the_closest_and_how_to_list_them():
    with pytest.raises(ValueError) as error:
        config_path("tiny/revers-transformer")
    message = str(error.value)
    assert "'tiny/revers-transformer'" in message
    assert "tiny/reverse-transformer" in message and "`qkv configs`" in message
    with pytest.raises(ValueError, match="named 'xyzzy' \\(`qkv configs` lists them all\\)"):
        config_path("xyzzy")


@pytest.mark.parametrize("missing", ["runs/mine.yaml", "demo/x.yml", "./demo", "/no/such.yaml"])
def test_a_missing_path_is_a_missing_file_not_a_packaged_config(missing, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=f"^no configuration file {missing}$"):
        config_path(missing)


def test_the_repository_path_outside_the_checkout_names_the_packaged_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        config_path("configs/tiny/reverse-transformer.yaml")
    assert str(error.value) == (
        "no configuration file configs/tiny/reverse-transformer.yaml "
        "(the packaged configuration of that name is `tiny/reverse-transformer`)"
    )


def test_each_description_is_the_first_comment_line():
    found = presets()
    assert [p.name for p in found] == _on_disk()
    for preset in found:
        first = preset.path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# ") and preset.description == first[2:].strip(), preset.name


def test_a_wheel_without_its_configs_says_so(tmp_path, monkeypatch):
    import qkv.presets

    monkeypatch.setattr(qkv.presets, "_root", lambda: tmp_path / "configs")
    with pytest.raises(ValueError, match=r"packaged configurations are missing .*: reinstall qkv"):
        config_path("demo")
