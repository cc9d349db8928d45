"""A real browser (Debian's chromium driven by Python playwright; .ci/run installs chromium)
against the app served in-process: open the page, run the dot-product example, see 32, see
the six plots render, move the token slider and see the registers change; in the chat tab
(its assistant scripted: conftest.DOT_TURNS) send a message, see the tool call's box with the
GPU's result, open its launch in the CUDA tab's views — with no script error on the page."""

from __future__ import annotations

import shutil

import pytest

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.skipif(not shutil.which("chromium"),
                       reason="Debian's chromium is not installed (apt-get install chromium)"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


@pytest.fixture(scope="module")
def browser():
    """One chromium for the module (playwright's sync API runs one instance per thread)."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM,
                                    args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page(server, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(server)
    page.wait_for_selector("#cuda-run", timeout=60_000)
    yield page
    page.close()


def test_run_the_dot_product_and_scrub_its_tokens(page) -> None:
    assert "tiny base" in page.inner_text("#model-banner")
    assert "43 circuit layers" in page.inner_text("#model-header")
    assert "atomicAdd" in page.inner_text("#cuda-source")
    page.click("#cuda-run")
    page.wait_for_selector("#cuda-result .qg-ok", timeout=60_000)
    result = page.inner_text("#cuda-result")
    assert "Done" in result and "out (output array, 1 word)\n0\n32" in result
    for view in ("trace", "registers", "memory", "pipeline", "scheduler", "rom"):
        page.wait_for_selector(f"#view-{view} .main-svg", timeout=20_000)
    page.wait_for_function("document.querySelector('#token-caption').innerText"
                           ".includes('token 29 of 30')", timeout=20_000)
    registers = page.inner_text("#view-registers")
    assert "token 29 of 30" in page.inner_text("#view-scheduler")
    page.locator("#token-slider input[type=range]").fill("1")
    page.wait_for_function("document.querySelector('#view-registers').innerText"
                           ".includes('4 changed at this token')", timeout=20_000)
    after = page.inner_text("#view-registers")
    assert after != registers and "token 1 of 30" in page.inner_text("#view-scheduler")
    assert "token 1 of 30: val:r1:all:4" in page.inner_text("#token-caption")
    assert "exec:0:w0:m15" in page.inner_text("#view-trace")
    # the views redraw in place: a zoom survives scrubbing (uirevision)
    plot = "document.querySelector('#view-memory .js-plotly-plot')"
    page.evaluate(f"window.memoryPlot = {plot}; "
                  f"Plotly.relayout({plot}, {{'xaxis.range': [-0.5, 5.5]}})")
    page.locator("#token-slider input[type=range]").fill("27")  # mem:g9:32
    page.wait_for_function("document.querySelector('#view-memory').innerText"
                           ".includes('1 word changed at this token')", timeout=20_000)
    assert page.evaluate(f"window.memoryPlot === {plot}")
    assert page.evaluate(f"{plot}._fullLayout.xaxis.range") == [-0.5, 5.5]
    assert not page.errors, page.errors


def test_an_error_shows_in_the_page(page) -> None:
    page.fill("#cuda-args textarea", "[[1, 2, 3]]")
    page.click("#cuda-run")
    page.wait_for_selector("#cuda-result .qg-err", timeout=60_000)
    text = page.inner_text("#cuda-result")
    assert "takes 4 parameters, 1 args were given" in text and "Traceback" not in text
    assert not page.errors, page.errors


def test_pick_the_runaway_example_and_stop_it(page) -> None:
    from qgpu.app.examples import EXAMPLES

    label = next(e.label for e in EXAMPLES if e.expect == "runaway")
    page.locator("#cuda-example input").click()
    page.get_by_role("option", name=label).click()
    page.wait_for_function("document.querySelector('#cuda-source').innerText"
                           ".includes('never ends')", timeout=20_000)
    assert page.input_value("#cuda-grid input") == "1"
    page.click("#cuda-run")
    page.wait_for_selector("#cuda-result .qg-run", timeout=60_000)
    page.wait_for_function("document.querySelector('#token-caption').innerText"
                           ".includes('token ')", timeout=60_000)
    page.click("#cuda-stop", timeout=60_000)
    page.wait_for_selector("#cuda-result .qg-err", timeout=60_000)
    assert "Stopped by you after" in page.inner_text("#cuda-result")
    assert not page.errors, page.errors


def test_chat_a_gpu_call_then_open_its_launch_in_the_views(page) -> None:
    page.get_by_role("tab", name="Chat").click()
    page.fill("#chat-input textarea", "What is the dot product of [1,2,3] and [4,5,6]?")
    page.press("#chat-input textarea", "Enter")
    chatbot = "document.querySelector('#chatbot').innerText"
    page.wait_for_function(f"{chatbot}.includes('GPU: dot([1, 2, 3], [4, 5, 6])')",
                           timeout=60_000)
    page.wait_for_function(f"{chatbot}.includes('= 32 · 1 launch, 76 generated tokens')",
                           timeout=60_000)
    page.get_by_text("GPU: dot([1, 2, 3], [4, 5, 6])").click()  # unfold the call's box
    page.wait_for_function(f"{chatbot}.includes('Result: 32')", timeout=20_000)
    text = page.inner_text("#chatbot")
    assert "The dot product of [1, 2, 3] and [4, 5, 6] is 32." in text
    assert "exact ✓" in text and "Traceback" not in text
    page.get_by_role("button", name="Open launch 1 (calc_dot) in the views").click()
    page.wait_for_function("document.querySelector('#cuda-result').innerText"
                           ".includes('From the chat: launch 1')", timeout=30_000)
    assert page.is_visible("#cuda-run")  # the CUDA tab is the one shown
    assert "calc_dot" in page.inner_text("#cuda-source")
    page.wait_for_function("document.querySelector('#token-caption').innerText"
                           ".includes('token 75 of 76')", timeout=20_000)
    page.wait_for_function("document.querySelector('#view-scheduler').innerText"
                           ".includes('token 75 of 76')", timeout=20_000)
    assert "out (g" in page.inner_text("#view-memory")  # the legend names calc_dot's arrays
    assert not page.errors, page.errors


def test_a_waiting_run_shows_its_place_in_the_queue(one_slot_server, browser) -> None:
    """Two visitors, one launch slot: while the first one's runaway launch runs, the second
    one's Run shows its queue position over the result, then its own result."""
    from qgpu.app.examples import EXAMPLES

    runaway = next(e.label for e in EXAMPLES if e.expect == "runaway")
    first, second = (browser.new_page(viewport={"width": 1400, "height": 1000})
                     for _ in range(2))
    for page in (first, second):
        page.goto(one_slot_server)
        page.wait_for_selector("#cuda-run", timeout=60_000)
    first.locator("#cuda-example input").click()
    first.get_by_role("option", name=runaway).click()
    first.wait_for_function("document.querySelector('#cuda-source').innerText"
                            ".includes('never ends')", timeout=20_000)
    first.click("#cuda-run")
    first.wait_for_selector("#cuda-result .qg-run", timeout=60_000)
    second.click("#cuda-run")  # the dot product
    second.wait_for_function("/queue: *\\d+ *\\/ *\\d+/.test("
                             "document.querySelector('#cuda-result').innerText)",
                             timeout=30_000)
    second.wait_for_selector("#cuda-result .qg-ok", timeout=120_000)
    assert "0\n32" in second.inner_text("#cuda-result")
    first.wait_for_selector("#cuda-result .qg-err", timeout=120_000)
    assert "did not end within 2000 generated tokens" in first.inner_text("#cuda-result")
    first.close()
    second.close()
