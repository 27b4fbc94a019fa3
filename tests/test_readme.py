"""The README's Python examples run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})


def test_readme_command_lines_parse():
    """Every ``qkv ...`` line in the README's shell blocks is accepted by the real parser."""
    import shlex

    from qkv.cli.main import build_parser

    text = README.read_text().replace("\\\n", " ")
    lines = [
        line.split(" #")[0].strip()
        for block in re.findall(r"```bash\n(.*?)```", text, re.S)
        for line in block.splitlines()
    ]
    commands = []
    for line in lines:
        if "[" in line:  # optional parts written [like this] are documentation, not syntax
            continue
        words = shlex.split(line) if line else []
        if words[:1] == ["qkv"]:
            commands.append(words[1:])
        elif "-m" in words and words[words.index("-m") + 1 : words.index("-m") + 2] == ["qkv"]:
            commands.append(words[words.index("-m") + 2 :])
    assert len(commands) >= 5
    parser = build_parser()
    for args in commands:
        parsed = parser.parse_args(args)  # argparse exits (fails the test) on a bad flag
        assert hasattr(parsed, "run"), args
