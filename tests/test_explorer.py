"""The explorer page (`rulec viz`), tested in a real headless browser: Debian's chromium driven by Selenium
through Debian's chromedriver. Skipped, saying why, where those are not installed (.ci/run installs them).

A screenshot is written to $RULEC_ARTIFACT_DIR (set by .ci/run) or the test's temporary folder."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).parent / "scripts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
LOAD_BUDGET_S = 20.0  # the 10k-node page, from navigation to a drawn graph, on a 2-core machine

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:  # pragma: no cover - the test extra installs it
    webdriver = None

pytestmark = pytest.mark.skipif(
    webdriver is None or CHROMIUM is None or CHROMEDRIVER is None,
    reason="the explorer tests need selenium (pip) and chromium + chromedriver (apt: chromium chromium-driver)")


def _viz(program: Path, out: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "rulec.cli", "viz", str(program), "-o", str(out), *args],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("viz")
    _viz(SCRIPTS / "padded.py", folder / "padded.html")
    _viz(SCRIPTS / "big_chain.py", folder / "big.html")
    return folder


@pytest.fixture(scope="module")
def browser():
    options = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,900"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _open(browser, page: Path, fragment: str = "") -> None:
    browser.get(page.as_uri() + fragment)
    browser.get_log("browser")  # start each test with an empty console
    browser.refresh()
    _wait(browser, lambda: browser.execute_script("return !!window.rulecExplorer"))


def _wait(browser, cond, timeout: float = 15.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def _state(browser) -> dict:
    return browser.execute_script("return window.rulecExplorer.state")


def _data(page: Path) -> dict:
    text = page.read_text()
    raw = re.search(r'<script type="application/json" id="rulec-data">(.*?)</script>', text, re.S).group(1)
    return json.loads(raw.replace("<\\/", "</"))


def _drawn(browser) -> int:
    return browser.execute_script("return document.querySelectorAll('#graph g.node').length")


def test_the_page_is_self_contained(pages):
    text = (pages / "padded.html").read_text()
    assert "<script src" not in text and "<link" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "").replace('"http://www.w3.org/2000/svg"', "")


def test_it_loads_with_no_console_errors_and_draws_the_graph(browser, pages, tmp_path):
    _open(browser, pages / "padded.html", "#stage=7&step=3")
    _wait(browser, lambda: _drawn(browser) > 10)
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    assert "rangeify/index-through-elementwise" in browser.find_element(By.ID, "side").text
    shot = Path(os.environ.get("RULEC_ARTIFACT_DIR", tmp_path)) / "explorer.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000
    shutil.copy(pages / "padded.html", shot.parent / "explorer.html")  # the page itself, kept beside it


def test_keyboard_stepping(browser, pages):
    _open(browser, pages / "padded.html", "#stage=7&step=0")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_DOWN)
    body.send_keys(Keys.ARROW_DOWN)
    assert _state(browser)["step"] == 1
    current = browser.find_element(By.CSS_SELECTOR, "#steps .current").text
    assert current.startswith("#2 ")
    body.send_keys(Keys.ARROW_UP)
    assert _state(browser)["step"] == 0
    body.send_keys(Keys.ARROW_RIGHT)
    assert _state(browser)["stage"] == 7 and _state(browser)["step"] == -1
    assert "stage=8" in browser.current_url  # deep link follows


def test_a_node_clicked_in_columns_mode_is_coloured_in_every_stage(browser, pages):
    _open(browser, pages / "padded.html", "#stage=1&mode=columns")
    chips = browser.find_elements(By.CSS_SELECTOR, "#columns .column:last-child .chip")
    target = next(c for c in chips if c.text in ("DEFINE_GLOBAL", "CONST", "RANGE"))
    node = target.get_attribute("data-id")
    target.click()
    assert _state(browser)["node"] == node
    coloured = browser.find_elements(By.CSS_SELECTOR, f'#columns .chip.selected[data-id="{node}"]')
    assert len(coloured) >= 2  # the same node, in several stages
    assert len(browser.find_elements(By.CSS_SELECTOR, "#columns .column.has-selected")) >= 2


def test_search_finds_a_rule_and_links_to_its_step(browser, pages):
    _open(browser, pages / "padded.html")
    box = browser.find_element(By.ID, "search")
    box.send_keys("index-through-pad")
    results = _wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#results .result"))
    assert all("index-through-pad" in r.text for r in results)
    results[0].click()
    side = browser.find_element(By.ID, "side").text
    assert "rangeify_mops/index-through-pad" in side and "rules/schedule/rangeify_mops.yaml:" in side
    assert "q=index-through-pad" in browser.current_url
    rule = next(r for r in _data(pages / "padded.html")["trace"]["rules"] if r["name"] == "index-through-pad")
    box.clear()
    box.send_keys(f"{rule['file']}:{rule['line']}")  # by file:line
    assert _wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#results .result"))


def test_the_why_not_panel_shows_the_false_guard(browser, pages):
    data = _data(pages / "padded.html")
    rules = data["trace"]["rules"]
    key = next(k for k, answers in data["extra"]["whynot"].items()
               if any(rules[r]["name"] == "lt-by-bounds-true" and any("guard is false" in ln for ln in lines)
                      for r, lines in answers))
    stage, node = key.split(":")
    _open(browser, pages / "padded.html", f"#stage={int(stage) + 1}&step=0&node={node}")
    browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="whynot"]').click()
    side = browser.find_element(By.ID, "side").text
    assert "symbolic/lt-by-bounds-true" in side and "the guard is false: `x.vmax < y.vmin`" in side


def test_kernels_and_stats_tabs(browser, pages):
    _open(browser, pages / "padded.html")
    browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="kernels"]').click()
    browser.find_element(By.CSS_SELECTOR, "#side .kernel-link").click()
    assert "void" in browser.find_element(By.ID, "kernel-source").text
    browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="stats"]').click()
    assert browser.find_element(By.ID, "dead-title").text.startswith("dead rules (")


def test_a_10k_node_graph_loads_within_budget(browser, pages):
    data = _data(pages / "big.html")
    union = max(len(s["steps"]) for s in data["trace"]["stages"])
    assert len(data["trace"]["nodes"]) >= 10_000 and union >= 5_000
    t0 = time.time()
    _open(browser, pages / "big.html", "#stage=7")
    _wait(browser, lambda: _drawn(browser) > 100, timeout=LOAD_BUDGET_S)
    elapsed = time.time() - t0
    banner = browser.find_element(By.ID, "banner").text
    shown, total = map(int, re.match(r"showing (\d+) of (\d+) nodes", banner).groups())
    assert shown < total and total >= 10_000
    assert elapsed < LOAD_BUDGET_S
    print(f"10k-node explorer page: drawn {elapsed:.2f} s after navigation ({total} nodes in the stage)")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_DOWN)  # still responsive
    assert _state(browser)["step"] == 0
