#!/usr/bin/env python
"""The demo page's pictures in the docs (docs/images/demo_translate.png, demo_ner.png): the page with the given
models, a sentence translated (greedy) and one tagged, captured in headless Chromium (Debian: apt-get install chromium
chromium-driver; selenium comes with the [test] extra).

    python scripts/screenshots.py outputs/multi30k --ner_model outputs/conll-3/member1/averaged \
        --text "Ein Junge mit Kopfhörern sitzt auf den Schultern einer Frau." \
        --ner_text '" Lebed is now in Chechnya solving some problems , " Interfax quoted Chernomyrdin as saying .' \
        --out docs/images
"""

import argparse
import os
import shutil
import socket
import sys
import time

from vanilla_transformer.deploy.demo_page import build_app


def wait_for(condition, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a translation model directory")
    parser.add_argument("--ner_model", required=True, help="a tagger directory")
    parser.add_argument("--text", required=True, help="the sentence to translate")
    parser.add_argument("--ner_text", required=True, help="the text to tag")
    parser.add_argument("--out", default="docs/images")
    args = parser.parse_args(argv)

    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser, driver = shutil.which("chromium") or shutil.which("google-chrome"), shutil.which("chromedriver")
    if not browser or not driver:
        print(
            "error: Chromium and chromedriver are needed (Debian: apt-get install chromium chromium-driver)",
            file=sys.stderr,
        )
        return 2
    app = build_app(args.model, args.ner_model, strict=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1300,1000"):
        options.add_argument(flag)
    options.binary_location = browser
    page = webdriver.Chrome(service=Service(driver), options=options)
    try:
        page.get(f"http://127.0.0.1:{port}")

        def fill(css, text):
            box = wait_for(lambda: page.find_elements(By.CSS_SELECTOR, css), css)[0]
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(Keys.BACKSPACE)
            box.send_keys(text)

        fill("#source textarea", args.text)
        page.find_element(By.ID, "translate-button").click()
        translation = wait_for(
            lambda: page.find_element(By.CSS_SELECTOR, "#translation textarea").get_attribute("value"),
            "the translation",
        )
        wait_for(
            lambda: page.find_elements(By.CSS_SELECTOR, "#attention img, #attention canvas, #attention svg"),
            "the attention heatmap",
        )
        time.sleep(1.0)  # the plot finishes drawing
        os.makedirs(args.out, exist_ok=True)
        page.save_screenshot(os.path.join(args.out, "demo_translate.png"))
        print(f"translation: {translation}")

        next(b for b in page.find_elements(By.CSS_SELECTOR, "button[role=tab]") if b.text == "Tag entities").click()
        fill("#ner-text textarea", args.ner_text)
        page.find_element(By.ID, "ner-button").click()
        wait_for(lambda: page.find_elements(By.CSS_SELECTOR, "#entities .token.highlighted"), "the entities")
        time.sleep(1.0)
        page.save_screenshot(os.path.join(args.out, "demo_ner.png"))
        print(f"entities: {[s.text for s in page.find_elements(By.CSS_SELECTOR, '#entities .token.highlighted')]}")
    finally:
        page.quit()
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
