"""A bounded load test of the attention explorer on loopback: ``qkv serve`` in its own process,
REQUESTS requests from CLIENTS concurrent clients (threads, one HTTP connection each), valid
inputs with invalid ones mixed in; every request must get its expected answer (200 with views
for a valid input, the expected 4xx for an invalid one) and the server must still be healthy
afterwards. Latency percentiles go to ``docs/results/explorer-load.md``.

    qkv train configs/tiny/reverse-transformer.yaml          # the small text model
    qkv train configs/vit/digits.yaml --set train.max_minutes=1   # a small Vision Transformer
    PYTHONPATH=src python benchmarks/explorer_load.py --model runs/reverse-transformer \\
        --model runs/vit-digits

Valid inputs: random 3-7 symbol sequences for a text model (the reverse task's symbols), real
8x8 digits from scikit-learn as PNG files for an image model; one request in eight is invalid
(empty text, unknown model, over-long text, an image that is not one, a body that is not JSON).
With ``--no-write`` the results are printed only (the test suite runs it that way, smaller).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from harness import ROOT
from harness.machine import machine_description, utc_stamp
from harness.report import log, splice

from qkv.io import atomic_write_json

BEGIN, END = "<!-- explorer-load:begin -->", "<!-- explorer-load:end -->"
SYMBOLS = "abcdefghij"


def start_server(models: list[str], threads: int) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    argv = [sys.executable, "-m", "qkv", "serve", "--port", "0", "--threads", str(threads)]
    for model in models:
        argv += ["--model", model]
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = process.stdout.readline()
    match = re.search(r"at (http://\S+/)", line)
    if match is None:
        process.kill()
        raise SystemExit(f"qkv serve did not start: {line!r} {process.stderr.read()}")
    url = match.group(1)
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url + "api/health", timeout=5).raise_for_status()
            return process, url
        except httpx.TransportError:
            if time.monotonic() > deadline:
                process.kill()
                raise
            time.sleep(0.1)


def digit_pngs(count: int) -> list[str]:
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    images = load_digits().images[:count]
    encoded = []
    for image in images:
        buffer = io.BytesIO()
        Image.fromarray((image * (255 / 16)).round().astype(np.uint8), mode="L").save(buffer, "PNG")
        encoded.append(base64.b64encode(buffer.getvalue()).decode("ascii"))
    return encoded


def plan(count: int, models: list[dict], seed: int) -> list[tuple[str, object, int]]:
    """``count`` requests: ``(model name or "invalid", body, expected status)``; every eighth
    one invalid."""
    rng = random.Random(seed)
    digits = digit_pngs(64) if any(m["input"] == "image" for m in models) else []
    text_model = next((m["name"] for m in models if m["input"] == "text"), None)
    invalid: list[tuple[str, object, int]] = [
        ("invalid", {"model": "no-such-model", "text": "a b"}, 404),
        ("invalid", b"{not json", 422),
    ]
    if text_model:
        invalid += [
            ("invalid", {"model": text_model, "text": "   "}, 422),
            ("invalid", {"model": text_model, "text": "a " * 5000}, 422),
        ]
    image_model = next((m["name"] for m in models if m["input"] == "image"), None)
    if image_model:
        invalid.append(("invalid", {"model": image_model, "image": "bm90IGFuIGltYWdl"}, 422))
    requests = []
    for index in range(count):
        if index % 8 == 7:
            requests.append(rng.choice(invalid))
            continue
        model = models[(index - index // 8) % len(models)]  # the valid ones in turn
        if model["input"] == "text":
            text = " ".join(rng.choice(SYMBOLS) for _ in range(rng.randint(3, 7)))
            requests.append((model["name"], {"model": model["name"], "text": text}, 200))
        else:
            body = {"model": model["name"], "image": rng.choice(digits)}
            requests.append((model["name"], body, 200))
    return requests


def hammer(url: str, requests: list, clients: int) -> list[dict]:
    """Send ``requests`` from ``clients`` threads; each answer's status, expected status,
    latency and whether a 200 held views."""
    results: list[dict] = [{}] * len(requests)
    queue = iter(range(len(requests)))
    lock = threading.Lock()

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while True:
                with lock:
                    index = next(queue, None)
                if index is None:
                    return
                kind, body, expected = requests[index]
                start = time.perf_counter()
                try:
                    if isinstance(body, bytes):
                        headers = {"content-type": "application/json"}
                        reply = client.post("api/run", content=body, headers=headers)
                    else:
                        reply = client.post("api/run", json=body)
                    status, payload = reply.status_code, reply.json()
                except (httpx.HTTPError, json.JSONDecodeError) as error:
                    status, payload = None, {"error": repr(error)}
                seconds = time.perf_counter() - start
                ok = status == expected and (
                    ("views" in payload) if expected == 200 else ("error" in payload)
                )
                results[index] = {"kind": kind, "status": status, "expected": expected,
                                  "ok": ok, "seconds": seconds}  # fmt: skip

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarize(results: list[dict], seconds: float) -> dict:
    def stats(rows: list[dict]) -> dict:
        times = [r["seconds"] * 1000 for r in rows]
        return {
            "requests": len(rows),
            "p50_ms": round(statistics.median(times), 1) if times else None,
            "p95_ms": round(percentile(times, 0.95), 1) if times else None,
            "max_ms": round(max(times), 1) if times else None,
        }

    statuses: dict[str, int] = {}
    for row in results:
        statuses[str(row["status"])] = statuses.get(str(row["status"]), 0) + 1
    kinds = sorted({r["kind"] for r in results} - {"invalid"})
    return {
        "requests": len(results),
        "answered_as_expected": sum(r["ok"] for r in results),
        "statuses": dict(sorted(statuses.items())),
        "seconds": round(seconds, 2),
        "requests_per_s": round(len(results) / seconds, 1),
        "all": stats(results),
        "valid": stats([r for r in results if r["kind"] != "invalid"]),
        "invalid": stats([r for r in results if r["kind"] == "invalid"]),
        "by_model": {k: stats([r for r in results if r["kind"] == k]) for k in kinds},
    }


def report(summary: dict) -> str:
    rows = []
    groups = [(name, summary[name]) for name in ("all", "valid", "invalid")]
    groups += [(f"valid, {name}", s) for name, s in summary["by_model"].items()]
    for name, s in groups:
        rows.append(f"| {name} | {s['requests']} | {s['p50_ms']} | {s['p95_ms']} | {s['max_ms']} |")
    statuses = ", ".join(f"{k}: {v}" for k, v in summary["statuses"].items())
    return "\n".join(
        [
            BEGIN,
            "## Attention explorer: load test on loopback",
            "",
            "Generated by `benchmarks/explorer_load.py`: `qkv serve` in its own process "
            f"({summary['server_threads']} PyTorch thread) with {', '.join(summary['models'])}; "
            f"{summary['requests']} requests from {summary['clients']} concurrent clients, one in "
            "eight invalid (empty or over-long text, unknown model, not an image, not JSON). "
            "Each model runs one request at a time (its lock); the others wait their turn, so "
            "a request's latency is mostly its queue: about half the clients wait on each model.",
            "",
            f"- answered as expected: **{summary['answered_as_expected']} / "
            f"{summary['requests']}** ({statuses}); healthy afterwards: "
            f"**{'yes' if summary['healthy_after'] else 'no'}**",
            f"- {summary['seconds']} s in all, {summary['requests_per_s']} requests/s",
            "",
            "| requests | n | p50 (ms) | p95 (ms) | max (ms) |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"Command: `{summary['command']}` ({summary['date']}, {summary['machine']})",
            END,
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=[], help="model directory")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="the server's PyTorch threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--json", type=Path, default=Path("docs/results/explorer-load.json"))
    parser.add_argument("--out", type=Path, default=Path("docs/results/explorer-load.md"))
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the section from --json"
    )
    args = parser.parse_args()
    if args.report_only:
        splice(args.out, report(json.loads(args.json.read_text())), BEGIN, END)
        return 0
    if not args.model:
        parser.error("give at least one --model DIR")
    process, url = start_server(args.model, args.threads)
    try:
        models = httpx.get(url + "api/models", timeout=30).json()["models"]
        requests = plan(args.requests, models, args.seed)
        log(f"{len(requests)} requests from {args.clients} clients to {url}")
        start = time.perf_counter()
        results = hammer(url, requests, args.clients)
        summary = summarize(results, time.perf_counter() - start)
        health = httpx.get(url + "api/health", timeout=30)
        summary["healthy_after"] = health.status_code == 200 and health.json()["status"] == "ok"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    command = " ".join(["PYTHONPATH=src python benchmarks/explorer_load.py"]
                       + [f"--model {m}" for m in args.model])  # fmt: skip
    if (args.requests, args.clients) != (500, 16):
        command += f" --requests {args.requests} --clients {args.clients}"
    summary.update(
        models=[f"{m['name']} ({m['label']})" for m in models],
        clients=args.clients,
        server_threads=args.threads,
        command=command,
        date=utc_stamp(),
        machine=machine_description(),
    )
    print(json.dumps(summary, indent=2))
    if not args.no_write:
        atomic_write_json(args.json, summary)
        splice(args.out, report(summary), BEGIN, END)
    failed = summary["requests"] - summary["answered_as_expected"]
    return 0 if failed == 0 and summary["healthy_after"] else 1


if __name__ == "__main__":
    sys.exit(main())
