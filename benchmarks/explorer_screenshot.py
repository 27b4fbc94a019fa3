"""The explorer's screenshot for the README (``docs/results/explorer.png``): serve trained models
on a loopback port, drive the page in Chromium to a translation's cross-attention (or a language
model's self-attention) in the head view with one target token hovered, and save the PNG.

The README's picture shows a Transformer that has learnt the reverse task (800 steps, about a
CPU minute), served beside the load test's small ViT:

    qkv train configs/tiny/reverse-transformer.yaml --threads 1    # -> runs/reverse-transformer
    qkv train configs/vit/digits.yaml --set train.max_minutes=1    # -> runs/vit-digits
    PYTHONPATH=src python benchmarks/explorer_screenshot.py --text "a b c d e f g"

It needs Playwright's Python package and a Chromium (``--chromium``, Debian's by default); it
downloads nothing. The PNG is reduced to a 256-colour palette when it would be over ``--max-kb``.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from qkv.explorer.app import create_app  # noqa: E402
from qkv.explorer.server import background_server  # noqa: E402
from qkv.explorer.session import ExplorerModels  # noqa: E402

DEFAULT_MODELS = [ROOT / "runs" / name for name in ("reverse-transformer", "vit-digits")]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-quic"]  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", type=Path, help="a model directory (repeat)")
    parser.add_argument("--text", default="a b c d e f g", help="the input of the text model")
    parser.add_argument("--layer", type=int, default=-1, help="layer shown (default: the last)")
    parser.add_argument("--hover", type=int, default=2, help="the query token hovered")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/results/explorer.png")
    parser.add_argument("--width", type=int, default=1000, help="viewport width in CSS pixels")
    parser.add_argument("--max-kb", type=int, default=300)
    parser.add_argument("--chromium", type=Path, default=Path("/usr/bin/chromium"))
    return parser.parse_args(argv)


def shrink(png: bytes, max_bytes: int) -> bytes:
    """``png``, or the same picture in a 256-colour palette when ``png`` is over ``max_bytes``."""
    if len(png) <= max_bytes:
        return png
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        buffer = io.BytesIO()
        image.convert("RGB").quantize(256, dither=Image.Dither.NONE).save(
            buffer, "PNG", optimize=True
        )
    return buffer.getvalue()


def screenshot(args: argparse.Namespace) -> bytes:
    from playwright.sync_api import sync_playwright

    models = ExplorerModels.load(args.model or [p for p in DEFAULT_MODELS if p.is_dir()])
    kinds = {m.name: m.kind for m in models}
    text_model = next(
        (n for kind in ("translation", "language_model") for n, k in kinds.items() if k == kind),
        None,
    )
    if text_model is None:
        raise SystemExit("give a translation or language model (--model DIR)")
    view_id = "cross" if kinds[text_model] == "translation" else "decoder"
    with background_server(create_app(models)) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(args.chromium), args=ARGS)
        page = browser.new_page(
            viewport={"width": args.width, "height": 900}, device_scale_factor=1
        )
        page.goto(url)
        page.select_option("#model-select", text_model)
        page.fill("#text-input", args.text)
        if kinds[text_model] == "language_model":
            page.fill("#new-tokens", "12")
        page.click("#run-button")
        page.wait_for_selector("#app[data-state=done]", timeout=60_000)
        view = page.locator(f'.view[data-view-id="{view_id}"]')
        layers = view.locator(".layer-select option").count()
        view.locator(".layer-select").select_option(str(args.layer % layers))
        view.locator(".mode-heads").click()
        tokens = view.locator(".q-token").count()
        view.locator(f'.q-token[data-q="{min(args.hover, tokens - 1)}"]').hover()
        box = view.bounding_box()
        height = box["y"] + box["height"] + 8 + page.evaluate("window.scrollY")
        png = page.screenshot(
            full_page=True, clip={"x": 0, "y": 0, "width": args.width, "height": height}
        )
        browser.close()
    return png


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    png = shrink(screenshot(args), args.max_kb * 1024)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    print(f"wrote {args.out} ({len(png) / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
