"""The app's speed, measured in one run (issue 23's targets, this CPU, tiny build):

* start: ``python app.py --base tiny`` from process start until it serves (warm: the build
  stages and the engine's sparse form cached; ``--cold`` first empties a private cache
  directory to time a first start);
* click to result: in a real browser (Debian's chromium via playwright), from clicking Run on
  the dot-product example until its result (32) is on the page — the model generating 30
  tokens with the machine state read after each, then the page updated;
* slider step: from moving the token slider until the page shows that token (the caption and
  the scheduler view, which every step redraws; the other views are redrawn in the same update
  when their figure changed).

    python bench/app_speed.py [--cold] [--repeat 5] [--screenshot docs/app.png]

Targets: warm start <= 20 s, click to result <= 3 s, slider step <= 200 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(port: int, env: dict, timeout: float) -> tuple[subprocess.Popen, float, str]:
    """Start python app.py --base tiny and wait for its ready line: (process, seconds, log)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py"), "--base", "tiny", "--port",
                             str(port)], cwd=ROOT, env=env, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    log = []
    while True:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError("app.py exited before serving:\n" + "".join(log[-20:]))
        log.append(line)
        if "[qgpu app] ready" in line:
            return proc, time.perf_counter() - t0, "".join(log)
        if time.perf_counter() - t0 > timeout:
            proc.kill()
            raise RuntimeError("app.py did not serve in time")


def browser_timings(url: str, repeat: int, screenshot: str | None) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {"click_to_result": [], "slider_step": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or
                                    "/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(url)
        page.wait_for_selector("#cuda-run", timeout=60_000)
        for _ in range(repeat):
            ok = page.locator("#cuda-result .qg-ok")
            before = ok.inner_text() if ok.count() else ""
            t0 = time.perf_counter()
            page.click("#cuda-run")
            page.wait_for_function(
                "(before) => { const r = document.querySelector('#cuda-result');"
                " const ok = r.querySelector('.qg-ok');"
                " return ok && ok.innerText !== before && r.innerText.includes('32'); }",
                arg=before, timeout=120_000)
            out["click_to_result"].append(time.perf_counter() - t0)
            page.wait_for_function("document.querySelector('#token-caption').innerText"
                                   ".includes('token 29 of 30')", timeout=30_000)
        slider = page.locator("#token-slider input[type=range]")
        shows = ("(k) => document.querySelector('#token-caption').innerText.includes("
                 "`token ${k} of`) && document.querySelector('#view-scheduler').innerText"
                 ".includes(`token ${k} of`)")
        for k in [1, 5, 9, 12, 16, 20, 24, 27, 3, 14][:max(repeat * 2, 4)]:
            t0 = time.perf_counter()
            slider.fill(str(k))
            page.wait_for_function(shows, arg=k, timeout=30_000)
            out["slider_step"].append(time.perf_counter() - t0)
        if screenshot:
            slider.fill("12")
            page.wait_for_function(shows, arg=12, timeout=30_000)
            time.sleep(1.0)
            page.screenshot(path=screenshot, full_page=True)
        browser.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cold", action="store_true",
                    help="first start: build into an empty private cache (minutes, ~7 GB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--screenshot", help="save a full-page screenshot here (PNG)")
    ns = ap.parse_args()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    tmp = None
    if ns.cold:
        tmp = tempfile.mkdtemp(prefix="qgpu-app-cold-")
        env["QGPU_CACHE_DIR"] = tmp
    results: dict[str, object] = {}
    try:
        if ns.cold:
            port = free_port()
            proc, seconds, log = start_app(port, env, 3600)
            results["first start (empty cache)"] = f"{seconds:.1f} s"
            proc.terminate()
            proc.wait(30)
        port = free_port()
        proc, seconds, log = start_app(port, env, 900)
        results["warm start"] = f"{seconds:.1f} s"
        try:
            times = browser_timings(f"http://127.0.0.1:{port}/", ns.repeat, ns.screenshot)
        finally:
            proc.terminate()
            proc.wait(30)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    for name, values in times.items():
        results[name.replace("_", " ")] = (
            f"median {statistics.median(values):.3f} s, best {min(values):.3f} s "
            f"({len(values)} runs)")
    print(f"app speed ({os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end):")
    for k, v in results.items():
        print(f"  {k:28s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
