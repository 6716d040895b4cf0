"""`vanilla-transformer serve`: the API (ours and LibreTranslate's, driven by its own client), dynamic batching under
concurrent clients, limits, faults, the API key and a graceful SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import strategies as st

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from fastapi.testclient import TestClient  # noqa: E402

from conftest import FakeEngine, client_for, free_port, post_json, start_server, wait_ready  # noqa: E402
from vanilla_transformer import data  # noqa: E402
from vanilla_transformer.deploy.engines import TaggerEngine, TranslationEngine  # noqa: E402
from vanilla_transformer.deploy.server.app import Settings, create_app  # noqa: E402
from vanilla_transformer.model_dirs import recognise


def test_native_and_libretranslate_endpoints_in_order():
    with client_for(FakeEngine()) as client:
        wait_ready(client)
        response = client.post("/v1/translate", json={"sentences": ["abc", "", "  hallo welt ", "x"]})
        assert response.status_code == 200
        assert response.json() == {"translations": ["cba", "", "tlew ollah", "x"]}  # empty stays empty, stripped
        assert client.post("/translate", json={"q": "abc", "source": "de", "target": "en"}).json() == {
            "translatedText": "cba"
        }
        assert client.post("/translate", json={"q": ["ab", "cd"], "source": "auto", "target": "en"}).json() == {
            "translatedText": ["ba", "dc"],
            "detectedLanguage": [{"language": "de", "confidence": 100.0}] * 2,
        }
        form = client.post("/translate", data={"q": "abc", "source": "de", "target": "en", "format": "text"})
        assert form.json() == {"translatedText": "cba"}
        assert client.get("/languages").json() == [
            {"code": "de", "name": "German", "targets": ["en"]},
            {"code": "en", "name": "English", "targets": []},
        ]
        metrics = client.get("/metrics").text
        assert 'vt_requests_total{path="/v1/translate",status="200"} 1' in metrics
        assert "vt_sentences_total 7" in metrics and "vt_batch_sentences_count" in metrics
        assert "process_resident_memory_bytes" in metrics  # prometheus_client's process metrics


@pytest.mark.parametrize(
    "request_kwargs, status, message",
    [
        (dict(url="/v1/translate", content=b"{not json", headers={"content-type": "application/json"}), 422, "JSON"),
        (dict(url="/v1/translate", json={"sentences": "abc"}), 422, "sentences"),
        (dict(url="/v1/translate", json={"sentences": ["a"], "num_beams": 0}), 422, "num_beams"),
        (dict(url="/v1/translate", json={"sentences": ["a"], "beams": 2}), 422, "beams"),
        (dict(url="/v1/translate", json={"sentences": ["a"], "num_beams": 9}), 400, "--max_beams"),
        (dict(url="/v1/translate", json={"sentences": ["a"] * 5}), 413, "--max_sentences"),
        (dict(url="/v1/translate", json={"sentences": ["a " * 20]}), 400, "sentence 0 has 21 tokens"),
        (dict(url="/v1/translate", json={"sentences": ["a" * 3000]}), 413, "--max_request_bytes"),
        (
            dict(
                url="/v1/translate",
                content=iter([b'{"sentences": ["', b"a" * 3000, b'"]}']),  # chunked: no length
                headers={"content-type": "application/json"},
            ),
            413,
            "--max_request_bytes",
        ),
        (
            dict(url="/translate", content=b"{not json", headers={"content-type": "application/json"}),
            400,
            "malformed JSON",
        ),
        (
            dict(url="/translate", content=b"[1]", headers={"content-type": "application/json"}),
            400,
            "must be an object",
        ),
        (dict(url="/translate", json={"source": "de", "target": "en"}), 400, "missing q"),
        (dict(url="/translate", json={"q": 5, "source": "de", "target": "en"}), 400, "q must be"),
        (dict(url="/translate", json={"q": "a", "source": "fr", "target": "en"}), 400, "fr is not supported"),
        (
            dict(url="/translate", json={"q": "a", "source": "en", "target": "de"}),
            400,
            "German (de) is not available as a target language from English (en)",
        ),
        (
            dict(url="/translate", json={"q": "a", "source": "de", "target": "en", "format": "md"}),
            400,
            "md format is not supported",
        ),
        (
            dict(url="/translate", json={"q": "a", "source": "de", "target": "en", "alternatives": "x"}),
            400,
            "alternatives parameter is not a number",
        ),
        (
            dict(url="/translate", json={"q": "a", "source": "de", "target": "en", "alternatives": 8}),
            400,
            "alternatives parameter must be <= 7",
        ),
        (dict(url="/translate", json={"q": ["a"] * 5, "source": "de", "target": "en"}), 413, "--max_sentences"),
        (dict(url="/translate", json={"q": "a\nb\nc\nd\ne", "source": "de", "target": "en"}), 413, "5 sentences"),
        (dict(url="/translate", content=b"q=a", headers={"content-type": "text/plain"}), 415, "content type"),
        (
            dict(
                url="/translate",
                content=b'{"q": "a\\ud800", "source": "de", "target": "en"}',
                headers={"content-type": "application/json"},
            ),
            400,
            "lone surrogate (U+D800)",
        ),
        (
            dict(url="/translate", content=b'{"q": ' + b"[" * 1900, headers={"content-type": "application/json"}),
            400,
            "malformed JSON body",
        ),  # (Python 3.11's parser stops at its recursion limit, 3.13's at the missing value)
        (
            dict(
                url="/v1/translate",
                content=b'{"sentences": ["a\\udc00"]}',
                headers={"content-type": "application/json"},
            ),
            422,
            "lone leading surrogate",
        ),
        (
            dict(
                url="/v1/translate",
                content=b'{"sentences": ' + b"[" * 1900,
                headers={"content-type": "application/json"},
            ),
            422,
            "recursion limit exceeded",
        ),
    ],
)
def test_bad_requests_get_a_json_error_naming_the_problem(request_kwargs, status, message):
    engine = FakeEngine()
    with client_for(engine, max_sentences=4, max_sentence_tokens=16, max_request_bytes=2000, max_beams=8) as client:
        wait_ready(client)
        response = client.post(**request_kwargs)
        assert response.status_code == status, response.text
        assert message in response.json()["error"]
        assert engine.batches == []  # nothing reached the engine
        assert client.post("/v1/translate", json={"sentences": ["ok"]}).json() == {"translations": ["ko"]}


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(["de", "en", "text", "html", "a\ud800", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)
FIELDS = st.dictionaries(
    st.sampled_from(["q", "source", "target", "format", "api_key", "alternatives", "x"]), JSON_VALUES, max_size=6
)


def test_unknown_routes_and_methods_answer_json_errors():
    """404 and 405 come as every other error does, `{"error": ...}`."""
    with client_for(FakeEngine()) as client:
        for response, status in (
            (client.get("/nowhere"), 404),
            (client.get("/translate"), 405),
            (client.post("/languages"), 405),
        ):
            assert response.status_code == status and set(response.json()) == {"error"}, response.text
        metrics = client.get("/metrics").text  # counted by route: a made-up path does not become a label
        assert 'path="other",status="404"' in metrics and "/nowhere" not in metrics


def test_any_json_body_is_answered_with_a_json_status_never_a_500():
    """Property: any JSON value as the body of each public route (objects with LibreTranslate's and our fields, of any
    type, nested, holding lone surrogates) is answered 200 or a 4xx whose body is `{"error": ...}`."""
    from hypothesis import HealthCheck, given, settings

    with client_for(FakeEngine(), max_sentences=4, max_sentence_tokens=16) as client:
        wait_ready(client)

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            url=st.sampled_from(["/translate", "/detect", "/translate_file", "/v1/translate", "/v1/ner"]),
            body=FIELDS | JSON_VALUES | st.builds(lambda f: {"sentences": f}, JSON_VALUES),
        )
        def answered(url, body):
            response = client.post(url, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
            assert response.status_code == 200 or 400 <= response.status_code < 500, (body, response.text)
            if response.status_code != 200:
                assert set(response.json()) == {"error"}, response.text

        answered()


def test_api_key_is_required_when_set():
    with client_for(FakeEngine(), api_key="s3cret") as client:
        wait_ready(client)
        assert client.post("/v1/translate", json={"sentences": ["a"]}).status_code == 403
        assert client.post("/v1/translate", json={"sentences": ["a"], "api_key": "wrong"}).status_code == 403
        assert client.post("/v1/translate", json={"sentences": ["ab"]}, headers={"x-api-key": "s3cret"}).json() == {
            "translations": ["ba"]
        }
        assert client.post("/translate", data={"q": "ab", "source": "de", "target": "en"}).status_code == 403
        assert client.post(
            "/translate", data={"q": "ab", "source": "de", "target": "en", "api_key": "s3cret"}
        ).json() == {"translatedText": "ba"}
        # LibreTranslate's endpoint takes the header as /v1/* does; a wrong one is refused
        assert client.post(
            "/translate", data={"q": "ab", "source": "de", "target": "en"}, headers={"x-api-key": "s3cret"}
        ).json() == {"translatedText": "ba"}
        assert (
            client.post(
                "/translate", json={"q": "ab", "source": "de", "target": "en"}, headers={"x-api-key": "wrong"}
            ).status_code
            == 403
        )
        assert client.get("/health").status_code == 200  # not a translate call


def test_loading_then_ready():
    engine = FakeEngine()
    engine.loaded.clear()
    with client_for(engine) as client:
        health = client.get("/health")
        assert health.status_code == 503 and health.json() == {"error": "the models are still loading"}
        detail = client.get("/v1/health")
        assert detail.status_code == 503 and detail.json()["models"]["de-en"]["status"] == "loading"
        busy = client.post("/v1/translate", json={"sentences": ["a"]})
        assert busy.status_code == 503 and busy.headers["retry-after"] == "2"
        engine.loaded.set()
        wait_ready(client)
        assert client.post("/v1/translate", json={"sentences": ["ab"]}).json() == {"translations": ["ba"]}


def test_a_crashed_engine_call_fails_its_batch_only():
    engine = FakeEngine(fail_on="boom")
    with client_for(engine, max_wait_ms=0) as client:
        wait_ready(client)
        failed = client.post("/v1/translate", json={"sentences": ["boom"]})
        assert failed.status_code == 500 and failed.json() == {"error": "the model failed: RuntimeError"}
        assert client.post("/v1/translate", json={"sentences": ["ab"]}).json() == {"translations": ["ba"]}
        assert "vt_engine_errors_total 1" in client.get("/metrics").text


def test_full_queue_is_503_with_retry_after_and_slow_engine_is_504():
    engine = FakeEngine(delay=0.5)
    with client_for(engine, max_queue=2, max_wait_ms=0, request_timeout=5) as client:
        wait_ready(client)
        with ThreadPoolExecutor(4) as pool:
            first = pool.submit(client.post, "/v1/translate", json={"sentences": ["a"]})  # the engine is busy
            time.sleep(0.1)
            second = pool.submit(client.post, "/v1/translate", json={"sentences": ["b", "c"]})  # waits: queue full
            time.sleep(0.1)
            third = client.post("/v1/translate", json={"sentences": ["d"]})
            assert third.status_code == 503 and third.headers["retry-after"] == "1"
            assert "--max_queue" in third.json()["error"]
            assert first.result().status_code == 200 and second.result().json() == {"translations": ["b", "c"]}
    with client_for(FakeEngine(delay=1.0), request_timeout=0.2) as client:
        wait_ready(client)
        late = client.post("/v1/translate", json={"sentences": ["a"]})
        assert late.status_code == 504 and "--request_timeout" in late.json()["error"]


@pytest.mark.parametrize("workers", [1, 2])
def test_concurrent_requests_are_batched_and_never_mixed(workers):
    """With `--workers 2` two batches run at once (never more), and still no request gets another's sentences. The
    16 clients' sentences (3-7 tokens each) are more than one batch of 30 tokens holds, so a second batch has
    sentences to start with while the first runs."""
    engine = FakeEngine(delay=0.1, workers=workers)
    requests = [[f"r{r} s{s} " + "w " * ((r * 7 + s) % 5) for s in range(1 + r % 4)] for r in range(40)]
    with client_for(engine, max_wait_ms=20, max_batch_tokens=30) as client:
        wait_ready(client)
        with ThreadPoolExecutor(16) as pool:
            responses = list(pool.map(lambda q: client.post("/v1/translate", json={"sentences": q}), requests))
    for sentences, response in zip(requests, responses):
        assert response.json()["translations"] == [s.strip()[::-1] for s in sentences]
    assert len(engine.batches) < sum(map(len, requests)) / 2  # sentences of several requests shared engine calls
    assert max(len(b) for b in engine.batches) > 4
    assert engine.most_running == workers


# ------------------------------------------------------------------------------------------ the real model and server


@pytest.fixture(scope="module")
def server(small_demo_model):
    proc, url = start_server(small_demo_model, "--max_wait_ms", "20", "--metrics")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_load_test_reports_throughput_latency_and_batches(server, small_demo_model, tmp_path):
    """scripts/load_test.py against the server: every request answered at each concurrency, latencies in order, and
    the engine batches' mean size from /metrics (one client: one sentence a batch)."""
    import runpy

    sentences = tmp_path / "sentences.txt"
    sentences.write_text("ab12\ncd34 ef\n\n", encoding="utf-8")
    load_test = runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "scripts", "load_test.py"))
    out = tmp_path / "rows.json"
    assert (
        load_test["main"](
            [
                "--url",
                server,
                "--input",
                str(sentences),
                "--concurrency",
                "1",
                "6",
                "--requests",
                "18",
                "--pid",
                str(os.getpid()),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads(out.read_text())
    assert [row["concurrency"] for row in rows] == [1, 6]
    assert all(
        row["answered"] == 18
        and not row["errors"]
        and row["sentences_per_second"] > 0
        and row["p50_ms"] <= row["p99_ms"]
        and row["server_rss_mb"] > 0
        for row in rows
    )
    assert rows[0]["mean_batch_sentences"] == 1.0 and 1.0 <= rows[1]["mean_batch_sentences"] <= 6


def test_libretranslate_client_and_many_concurrent_clients(server, small_demo_model):
    from libretranslatepy import LibreTranslateAPI

    from vanilla_transformer.deploy.translators import make_translator

    sources = [pair["src"] for pair in data.make_demo_translation(96, seed=99, max_length=12)["translation"]]
    sequential = make_translator(small_demo_model, "pytorch", "cpu")(sources)
    client = LibreTranslateAPI(server)
    assert client.translate(sources[0], "src", "tgt") == sequential[0]
    assert client.languages() == [
        {"code": "src", "name": "src", "targets": ["tgt"]},
        {"code": "tgt", "name": "tgt", "targets": []},
    ]
    chunks = [sources[i : i + 1 + i % 5] for i in range(0, 96, 6)]
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda q: post_json(server + "/v1/translate", {"sentences": q}), chunks))
    assert [t for r in results for t in r["translations"]] == [
        t for i in range(0, 96, 6) for t in sequential[i : i + 1 + i % 5]
    ]
    with urllib.request.urlopen(server + "/metrics") as response:
        metrics = response.read().decode()
    assert "vt_batch_sentences_count" in metrics


def test_sigterm_finishes_requests_in_flight(small_demo_model):
    proc, url = start_server(small_demo_model, "--max_wait_ms", "1500")  # the batch waits: surely in flight
    result = {}
    worker = threading.Thread(target=lambda: result.update(post_json(url + "/v1/translate", {"sentences": ["ab12"]})))
    worker.start()
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    worker.join(timeout=60)
    assert proc.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has drained
    assert len(result["translations"]) == 1 and result["translations"][0]


@pytest.mark.parametrize("engine_name", ["pytorch", "ctranslate2"])
def test_engine_counts_whole_sentences_and_freezes_what_it_loaded(small_demo_model, engine_name, tmp_path):
    """The count is the tokenizer's: special tokens included, never cut or padded, even where the saved tokenizer
    file carries truncation and padding settings (a tokenizer call drops them; the limits must see the whole
    sentence). After loading, the collector skips what was loaded (a full collection over the libraries paused every
    request for 200+ ms)."""
    import gc
    import shutil

    from vanilla_transformer.deploy.translators import make_translator
    from vanilla_transformer.tokenization import load_tokenizer

    if engine_name == "ctranslate2":
        pytest.importorskip("ctranslate2")
    model_dir = shutil.copytree(small_demo_model, tmp_path / "model")
    saved = json.loads((model_dir / "tokenizer.json").read_text())
    saved["truncation"] = {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}
    saved["padding"] = {
        "strategy": {"Fixed": 16},
        "direction": "Right",
        "pad_to_multiple_of": None,
        "pad_id": 0,
        "pad_type_id": 0,
        "pad_token": "<pad>",
    }
    (model_dir / "tokenizer.json").write_text(json.dumps(saved))
    engine = TranslationEngine(recognise(model_dir, engine_name), "src", "tgt", "cpu")
    try:
        engine.load()
        assert engine.error is None and engine.ready.is_set()
        assert gc.get_freeze_count() > 0
        texts = ["ab12", "x", "abc123 " * 400]
        counts = engine.count_tokens(texts)
        assert counts == [len(ids) for ids in load_tokenizer(small_demo_model)(texts)["input_ids"]]
        assert counts[0] < 8 < counts[-1]
        assert engine.process(["ab12 cd"], (1, None, 1)) == [
            make_translator(small_demo_model, "pytorch", "cpu")(["ab12 cd"])
        ]
    finally:
        gc.unfreeze()


def test_ctranslate2_workers_translate_concurrent_batches_as_one(small_demo_model):
    """`--workers 2`: two CTranslate2 batches at once from two threads (one tokenizer between them) give the
    translations of one batch at a time."""
    pytest.importorskip("ctranslate2")
    sources = [pair["src"] for pair in data.make_demo_translation(64, seed=5, max_length=12)["translation"]]
    chunks = [sources[i : i + 8] for i in range(0, 64, 8)]
    import gc

    engine, one = (
        TranslationEngine(recognise(small_demo_model, "ctranslate2"), "src", "tgt", "cpu", threads=2, workers=workers)
        for workers in (2, 1)
    )
    try:
        engine.load()
        one.load()
        assert engine.error is None and engine.translator.workers == 2
        with ThreadPoolExecutor(2) as pool:
            together = list(pool.map(lambda chunk: engine.process(chunk, (1, None, 1)), chunks))
        assert together == [one.process(chunk, (1, None, 1)) for chunk in chunks]
    finally:
        gc.unfreeze()  # (loading froze the collector's view of the test process)


def test_default_threads_count_as_torch_does():
    """`--threads 0` means as many threads as torch would take (physical cores, at most OMP_NUM_THREADS or
    MKL_NUM_THREADS), counted without importing torch."""
    code = (
        "import sys\nfrom vanilla_transformer.model_dirs import default_threads\nthreads = default_threads()\n"
        "assert 'torch' not in sys.modules\nimport torch\nprint(threads, torch.get_num_threads())"
    )
    env = {name: value for name, value in os.environ.items() if name not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    for extra in (
        {},
        {"OMP_NUM_THREADS": "1"},
        {"OMP_NUM_THREADS": "64"},
        {"OMP_NUM_THREADS": "64", "MKL_NUM_THREADS": "1"},
    ):
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**env, **extra}, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        ours, torchs = proc.stdout.split()
        assert ours == torchs, extra
        assert ours == "1" or extra.get("MKL_NUM_THREADS", extra.get("OMP_NUM_THREADS")) != "1", extra


def test_default_workers_one_per_thread_for_ctranslate2_on_a_cpu():
    from vanilla_transformer.commands.serve import default_workers
    from vanilla_transformer.model_dirs import default_threads

    assert default_workers(False, "cpu", 0) == default_threads()
    assert default_workers(False, "cpu", 3) == 3
    assert default_workers(True, "cpu", 3) == 1  # PyTorch: one batch at a time


def test_serve_command_errors_are_one_line(small_demo_model):
    proc = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer.cli", "serve", "/no/such/model"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "vanilla-transformer serve: error: no such directory: '/no/such/model'."
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer.cli", "serve", str(small_demo_model), "--workers", "2"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith(
        "vanilla-transformer serve: error: --workers: several batches at once need the CTranslate2 engine"
    )


def test_a_model_that_cannot_load_ends_the_command_before_it_listens(small_demo_model, tmp_path):
    """A saved directory that passes the path checks but whose weights file is missing: `serve` loads before it
    listens, so the command ends at once with one error line naming the file and exit status 2 (it used to listen and
    answer 503 until stopped). A training-arguments `.bin` beside it is not taken for pickled weights."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(small_demo_model, broken)
    (broken / "model.safetensors").unlink()
    (broken / "training_args.bin").write_bytes(b"not weights")
    proc = subprocess.run(
        [sys.executable, "-m", "vanilla_transformer.cli", "serve", str(broken), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vanilla-transformer serve: error: could not load the model in ")
    assert "model.safetensors" in lines[0] and "pickled" not in lines[0]


# ------------------------------------------------------------------------------------------------- named entities

NER_TEXTS = ["yesterday Anna Novak visited Acme Corp in Oslo", "", "  Oslo welcomed Anna  ", "Acme Corp hired Novak"]


def test_ner_endpoint_with_a_tagger_alone(small_ner_model):
    """A tagger alone: /v1/ner answers each text's entities as `tag` computes them (offsets into the texts as sent,
    an empty text none); /v1/translate says there is no translation model; limits, key and bad bodies as for
    translation."""
    from vanilla_transformer.deploy.taggers import Tagger, line_entities

    expected = line_entities(Tagger(small_ner_model, device="cpu"), NER_TEXTS)
    app = create_app([], Settings(api_keys={"k": None}, max_sentences=4), TaggerEngine(str(small_ner_model), "cpu"))
    with TestClient(app) as client:
        wait_ready(client)
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/v1/health").json() == {
            "status": "ready",
            "models": {"ner": {"model_dir": str(small_ner_model), "status": "ready"}},
        }
        response = client.post("/v1/ner", json={"sentences": NER_TEXTS, "api_key": "k"})
        assert response.status_code == 200 and response.json() == {"entities": expected}
        assert [e["type"] for e in expected[0]] == ["PER", "ORG", "LOC"] and expected[1] == []
        for body, status, message in (
            ({"sentences": NER_TEXTS}, 403, "Invalid API key"),
            ({"sentences": NER_TEXTS * 2, "api_key": "k"}, 413, "at most 4"),
            ({"sentences": ["Oslo"], "api_key": "k", "num_beams": 2}, 422, "num_beams"),
            ({"sentences": [], "api_key": "k"}, 422, "sentences"),
        ):
            response = client.post("/v1/ner", json=body)
            assert response.status_code == status and message in response.json()["error"], (body, response.json())
        response = client.post("/v1/translate", json={"sentences": ["ab"], "api_key": "k"})
        assert response.status_code == 404 and "no translation model" in response.json()["error"]


def test_one_server_translates_and_tags_for_concurrent_clients(small_demo_model, small_ner_model):
    """`serve TRANSLATION_DIR --ner TAGGER_DIR`: both endpoints in one process; 16 concurrent clients mixing them get
    what sequential calls give; a translation model given as --ner is one error line."""
    from vanilla_transformer.deploy.taggers import Tagger, line_entities
    from vanilla_transformer.deploy.translators import make_translator

    proc, url = start_server(small_demo_model, "--ner", str(small_ner_model), "--max_wait_ms", "20")
    try:
        assert post_json(url + "/v1/ner", {"sentences": NER_TEXTS[:1]})["entities"][0][0]["text"] == "Anna Novak"
        sources = [pair["src"] for pair in data.make_demo_translation(32, seed=7, max_length=12)["translation"]]
        texts = [
            f"{a} visited {b} with {c}"
            for a, b, c in zip(
                ["Anna", "Novak", "Anna Novak", "Acme Corp"] * 8, ["Oslo", "Acme Corp"] * 16, ["Anna", "Oslo"] * 16
            )
        ]
        translations = make_translator(small_demo_model, "pytorch", "cpu")(sources)
        entities = line_entities(Tagger(small_ner_model, device="cpu"), texts)
        calls = [("/v1/translate", sources[i : i + 2]) if i % 4 else ("/v1/ner", texts[i : i + 2]) for i in range(32)]
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda call: post_json(url + call[0], {"sentences": call[1]}), calls))
        for i, ((path, _), result) in enumerate(zip(calls, results)):
            assert result == (
                {"translations": translations[i : i + 2]}
                if path == "/v1/translate"
                else {"entities": entities[i : i + 2]}
            ), i
        with urllib.request.urlopen(url + "/v1/health") as response:
            assert set(json.loads(response.read())["models"]) == {"src-tgt", "ner"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vanilla_transformer.cli",
            "serve",
            str(small_demo_model),
            "--ner",
            str(small_demo_model),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "is not a saved tagger" in proc.stderr


def test_nonblank_batches_skip_blank_texts_and_put_outputs_back_in_order():
    """The one rule of the file commands and the routes: blank texts reach no batch and get `blank`; the others in
    input order (one batch), or sorted by length and cut (a size, or spans of their lengths); outputs in input order."""
    from vanilla_transformer.deploy.batches import nonblank_batches

    texts = ["ccc", " ", "a", "", "bb", "\t\n"]
    batches, scatter = nonblank_batches(texts, "-")
    assert batches == [["ccc", "a", "bb"]]
    assert scatter([[t.upper() for t in batch] for batch in batches]) == ["CCC", "-", "A", "-", "BB", "-"]
    batches, scatter = nonblank_batches(texts, "-", 2)
    assert batches == [["a", "bb"], ["ccc"]]
    assert scatter([[t.upper() for t in batch] for batch in batches]) == ["CCC", "-", "A", "-", "BB", "-"]
    seen = []
    batches, scatter = nonblank_batches([["x", "y"], [], ["z"]], None, lambda lengths: seen.append(lengths) or [(0, 2)])
    assert seen == [[1, 2]] and batches == [[["z"], ["x", "y"]]]
    assert scatter([["Z", "XY"]]) == ["XY", None, "Z"]
    assert nonblank_batches(["", " "], "-")[0] == [] and nonblank_batches(["", " "], "-")[1]([]) == ["-", "-"]
