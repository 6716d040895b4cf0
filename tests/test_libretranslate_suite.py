"""LibreTranslate's own API tests (`libretranslate/tests/test_api/` of its repository) against `serve` over HTTP.

Opt-in: set VT_LIBRETRANSLATE to a LibreTranslate checkout (or its bare git directory). Their test files are read
from there into a temporary directory, never into this repository; their `client` fixture (Flask's test client for a
server loaded with en and es) is replaced by a client of the same shape that calls a real `serve` process holding
the demo model as en -> es.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import files_of_checkout, start_server

SOURCE = os.environ.get("VT_LIBRETRANSLATE")
TESTS = "libretranslate/tests/test_api"

CONFTEST = '''
import json
import os
import urllib.error
import urllib.parse
import urllib.request

import pytest


class Response:
    def __init__(self, status, data):
        self.status_code, self.data = status, data
        try:
            self.json = json.loads(data)
        except ValueError:
            self.json = None


class Client:
    """Flask's test client as LibreTranslate's tests use it: get(path), post(path, data=form, json=body)."""

    def __init__(self, url):
        self.url = url

    def call(self, method, path, data=None, json_body=None):
        body, headers = None, {}
        if json_body is not None:
            body, headers = json.dumps(json_body).encode(), {"content-type": "application/json"}
        elif data is not None:
            body = urllib.parse.urlencode(data).encode()
            headers = {"content-type": "application/x-www-form-urlencoded"}
        request = urllib.request.Request(self.url + path, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return Response(response.status, response.read())
        except urllib.error.HTTPError as error:
            return Response(error.code, error.read())

    def get(self, path):
        return self.call("GET", path)

    def post(self, path, data=None, json=None):
        return self.call("POST", path, data, json)


@pytest.fixture()
def client():
    return Client(os.environ["VT_SERVER"])
'''


def read_tests(source: str) -> dict[str, str]:
    return {
        name: text
        for name, text in files_of_checkout(source, TESTS).items()
        if name.startswith("test_") and name.endswith(".py")
    }


@pytest.mark.skipif(not SOURCE, reason="set VT_LIBRETRANSLATE to a LibreTranslate checkout to run its API tests")
def test_libretranslates_own_api_tests_pass_against_serve(small_demo_model, tmp_path):
    tests = read_tests(SOURCE)
    assert tests, f"no test files under {TESTS} in {SOURCE}"
    suite = tmp_path / "test_api"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    for name, text in tests.items():
        (suite / name).write_text(text, encoding="utf-8")
    proc, url = start_server(f"{small_demo_model}:en-es")
    try:
        report = tmp_path / "report.json"
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--rootdir",
                str(suite),
                "-o",
                "addopts=",
                str(suite),
                "--junitxml",
                str(report),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "VT_SERVER": url},
            timeout=600,
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert run.returncode == 0, run.stdout[-4000:]
    summary = run.stdout.strip().splitlines()[-1]
    print(json.dumps({"libretranslate_api_tests": summary}))
    assert " passed" in summary and "failed" not in summary
