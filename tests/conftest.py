import atexit
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.environ.get("VT_SHARED_DATA", os.path.join(ROOT, "..", "shared", "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
if "HF_DATASETS_CACHE" not in os.environ:  # the Arrow files of the tests' corpora: not in the user's cache
    os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="vt-tests-datasets-")
    atexit.register(shutil.rmtree, os.environ["HF_DATASETS_CACHE"], ignore_errors=True)
if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest -n N: one thread per worker (and its children), no oversubscription
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
else:
    torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True)
def torch_threads_as_found():
    """Each test leaves torch's thread count as it found it: CTranslate2 shares torch's OpenMP runtime, so a translator
    of N threads sets torch's to N, and outputs compared bit for bit with a child process's depend on it."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: longer runs on real data (opt-in: VT_SLOW=1 or -m slow)")
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (make test-gpu; skipped without one)")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("VT_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: set VT_SLOW=1 to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def free_port() -> int:
    """A loopback TCP port nothing listens on now (for a test server or a torchrun rendezvous)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def files_of_checkout(source: str, folder: str) -> dict[str, str]:
    """name -> text of the files directly in `folder` of a peer's repository: a checkout or a (bare) git directory
    (what the search tool's fetch brings). Read from there, never copied into this repository."""
    if os.path.isdir(os.path.join(source, folder)):
        path = os.path.join(source, folder)
        return {
            name: open(os.path.join(path, name), encoding="utf-8").read()
            for name in os.listdir(path)
            if os.path.isfile(os.path.join(path, name))
        }
    git = ["git", "--git-dir", source]
    listing = subprocess.run([*git, "ls-tree", f"HEAD:{folder}"], capture_output=True, text=True, check=True).stdout
    names = [line.split("\t", 1)[1] for line in listing.splitlines() if line.split()[1] == "blob"]
    return {
        name: subprocess.run([*git, "show", f"HEAD:{folder}/{name}"], capture_output=True, text=True, check=True).stdout
        for name in names
    }


def torchrun_two() -> list[str]:
    """`torchrun --nproc_per_node 2 --master_port P` with this environment's torchrun (the test skips without one) and
    a free port P: ports derived from the test process's pid coincide between tests."""
    path = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if not os.path.exists(path):
        pytest.skip("torchrun not available")
    return [path, "--nproc_per_node", "2", "--master_port", str(free_port())]


B, S, T = 3, 9, 7  # the model tests' batch: sentences, source length, target length


def batch(config, seed=0, pad_last=True):
    """Random (input_ids, attention_mask, labels) of shapes (B, S), (B, S), (B, T); the last row padded."""
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(4, config.vocab_size, (B, S), generator=g)
    attention_mask = torch.ones(B, S, dtype=torch.long)
    if pad_last:  # the last row is padded after 4 tokens
        attention_mask[-1, 4:] = 0
        input_ids[-1, 4:] = config.pad_token_id
    labels = torch.randint(4, config.vocab_size, (B, T), generator=g)
    labels[-1, 5:] = -100
    return input_ids, attention_mask, labels


# Overrides of "tiny" for flex attention on a CPU: heads of 32 dimensions (its least there, FLEX_ON_CPU_MIN_HEAD_DIM)
FLEX_ON_CPU = dict(d_model=64, encoder_attention_heads=2, decoder_attention_heads=2)


def backend_config(implementation, **overrides):
    """The "tiny" configuration (dropout off) that `implementation` runs on a CPU."""
    from vanilla_transformer import VanillaTransformerConfig

    flex = FLEX_ON_CPU if implementation == "flex_attention" else {}
    return VanillaTransformerConfig.from_preset("tiny", dropout=0.0, **{**flex, **overrides})


def seq2seq(config, seed=0, **kwargs):
    """The translation model with weights drawn from `seed`, in eval mode."""
    from vanilla_transformer import VanillaTransformerForConditionalGeneration

    torch.manual_seed(seed)
    return VanillaTransformerForConditionalGeneration(config, **kwargs).eval()


@pytest.fixture(scope="session")
def hub():
    """The loopback Hub-API server (tests/hub_server.py): (endpoint, state), one per test process."""
    from hub_server import serve

    server, state = serve()
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()


@pytest.fixture(scope="session")
def redis_server():
    """A redis-server (the Debian package) on a loopback port, nothing saved to disk: its URL, one per test process;
    a skip where it or the Python client is absent."""
    pytest.importorskip("redis", reason="the redis client is not installed (the [serve] extra)")
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    import redis

    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tempfile.mkdtemp(prefix="vt-redis-"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    yield url, proc
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def redis_url(redis_server):
    """The test process's Redis, emptied for this test."""
    import redis

    url, _ = redis_server
    redis.Redis.from_url(url).flushall()
    return url


def push(endpoint, tmp_path, model_dir, repo_id):
    """`scripts/push_to_hub.py MODEL_DIR REPO_ID` to the loopback Hub at `endpoint`, in a child process."""
    from hub_server import hub_env

    return subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "push_to_hub.py"), str(model_dir), repo_id],
        env=hub_env(endpoint, tmp_path / "hf_home"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )


@pytest.fixture
def tiny_config():
    from vanilla_transformer import VanillaTransformerConfig

    return VanillaTransformerConfig.from_preset("tiny", dropout=0.0)


def tiny_tagger(seed: int = 0, **overrides):
    """A `VanillaTransformerForTokenClassification` of the tiny preset with these config fields, drawn from `seed`."""
    from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForTokenClassification

    torch.manual_seed(seed)
    return VanillaTransformerForTokenClassification(VanillaTransformerConfig.from_preset("tiny", **overrides))


def subprocess_env():
    """Environment for a child Python in which `vanilla_transformer` cannot be imported."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["HF_HUB_OFFLINE"] = "1"
    return env


# Prepended to child-process scripts: makes our package unimportable there even when it is pip-installed (as in
# `make test`), so the child sees what a user with only transformers installed sees.
BLOCK_PACKAGE = """
import sys
class _NoVanillaTransformer:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "vanilla_transformer":
            raise ImportError(f"{name} is blocked in this process")
        return None
sys.meta_path.insert(0, _NoVanillaTransformer())
"""


def tagging_accuracy_after_training(model, sample, steps: int, lr: float = 3e-3) -> float:
    """Train a tagger with AdamW on `sample(64)` batches of (ids, tags) for `steps` steps; return its token accuracy
    on a fresh `sample(200)` in eval mode."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        ids, tags = sample(64)
        loss = model(input_ids=ids, labels=tags).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    ids, tags = sample(200)
    with torch.no_grad():
        return (model(input_ids=ids).logits.argmax(-1) == tags).float().mean().item()


def randomize_deviations(model):
    """The relative-position bias starts at zero (the paper's model) and the character table empty; give them values
    so the invariants test them: random spellings, about half the tokens starting a word, specials (ids < 4) too."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "relative_bias" in name:
                param.normal_(generator=g)
        for name, buffer in model.named_buffers():
            if name.endswith("token_chars"):
                buffer.copy_(torch.randint(2, 255, buffer.shape, generator=g))
                buffer[:, 5:] = 0
                buffer[torch.rand(buffer.shape[0], generator=g) < 0.5, 0] = 1
                buffer[:4, 0] = 1


# ------------------------------------------------------------------------------------------------------ shared data

WORDS_DE = "ein hund eine katze der mann die frau läuft sitzt spielt im park auf dem gras mit einem ball".split()
EN = {
    "ein": "a",
    "hund": "dog",
    "eine": "a",
    "katze": "cat",
    "der": "the",
    "mann": "man",
    "die": "the",
    "frau": "woman",
    "läuft": "runs",
    "sitzt": "sits",
    "spielt": "plays",
    "im": "in the",
    "park": "park",
    "auf": "on",
    "dem": "the",
    "gras": "grass",
    "mit": "with",
    "einem": "a",
    "ball": "ball",
}


def write_parallel(directory, n=64, seed=0):
    rng = random.Random(seed)
    for split, count in (("train", n), ("validation", 10), ("test", 10)):
        de = [" ".join(rng.choice(WORDS_DE) for _ in range(rng.randint(3, 7))) for _ in range(count)]
        (directory / f"{split}.de").write_text("\n".join(s.capitalize() + "." for s in de) + "\n", encoding="utf-8")
        (directory / f"{split}.en").write_text(
            "\n".join(" ".join(EN[w] for w in s.split()).capitalize() + "." for s in de) + "\n", encoding="utf-8"
        )
    return directory


def translation_args(data_dir, out, *extra):
    return [
        "--train_file",
        str(data_dir / "train"),
        "--validation_file",
        str(data_dir / "validation"),
        "--test_file",
        str(data_dir / "test"),
        "--source_lang",
        "de",
        "--target_lang",
        "en",
        "--output_dir",
        str(out),
        "--config_name",
        "tiny",
        "--config_overrides",
        "dropout=0.0",
        "--vocab_size",
        "80",
        "--max_steps",
        "6",
        "--per_device_train_batch_size",
        "8",
        "--per_device_eval_batch_size",
        "4",
        "--generation_max_length",
        "12",
        "--warmup_steps",
        "2",
        "--logging_steps",
        "1",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        "--seed",
        "1",
        *extra,
    ]


def write_conll(path, sentences):
    path.write_text(
        "-DOCSTART- -X- -X- O\n\n"
        + "\n".join(
            "".join(
                f"{w} {'NNP' if w[0].isupper() else 'NN'} {'O' if t == 'O' else 'B-NP'} {t}\n"
                for w, t in zip(words, tags)
            )
            for words, tags in sentences
        )
    )


NER_SENTENCES = [
    (["Anna", "lives", "in", "Berlin", "."], ["B-PER", "O", "O", "B-LOC", "O"]),
    (["Acme", "Corp", "hired", "Ben", "Miller"], ["B-ORG", "I-ORG", "O", "B-PER", "I-PER"]),
    (["Paris", "is", "big"], ["B-LOC", "O", "O"]),
]


def ner_args(tmp_path, out, *extra):
    write_conll(tmp_path / "train.txt", NER_SENTENCES * 10)
    write_conll(tmp_path / "valid.txt", NER_SENTENCES)
    return [
        "--train_file",
        str(tmp_path / "train.txt"),
        "--validation_file",
        str(tmp_path / "valid.txt"),
        "--test_file",
        str(tmp_path / "valid.txt"),
        "--output_dir",
        str(out),
        "--config_name",
        "tiny",
        "--vocab_size",
        "60",
        "--max_steps",
        "6",
        "--per_device_train_batch_size",
        "8",
        "--warmup_steps",
        "2",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        *extra,
    ]


def read_predictions_file(path) -> list[tuple[list[str], list[str], list[str]]]:
    """A predictions file (`token gold predicted` per line, a blank line between sentences) as (words, gold tags,
    predicted tags) per sentence."""
    blocks = [block.splitlines() for block in open(path, encoding="utf-8").read().split("\n\n") if block.strip()]
    return [tuple(map(list, zip(*(line.split() for line in block)))) for block in blocks]


def f1_of_predictions_file(path) -> float:
    """seqeval's strict IOB2 entity F1 of a predictions file, computed independently of the training command's
    metric."""
    from seqeval.metrics import f1_score
    from seqeval.scheme import IOB2

    sentences = read_predictions_file(path)
    gold, pred = [g for _, g, _ in sentences], [p for _, _, p in sentences]
    return f1_score(gold, pred, mode="strict", scheme=IOB2), len(gold)


# A small model on the demo task with strings of 1-10 symbols: ~20 s of training, ~100% exact match on held-out strings.
DEMO_FLAGS = [
    "--config_overrides",
    "d_model=64,encoder_ffn_dim=256,decoder_ffn_dim=256,encoder_layers=2,"
    "decoder_layers=2,dropout=0.0,normalize_before=true",
    "--max_steps",
    "600",
    "--warmup_steps",
    "60",
    "--per_device_train_batch_size",
    "64",
    "--learning_rate",
    "3e-3",
    "--demo_max_length",
    "10",
    "--demo_train_examples",
    "20000",
    "--demo_eval_examples",
    "200",
    "--generation_max_length",
    "16",
    "--disable_tqdm",
    "true",
    "--bf16",
    "false",
    "--do_predict",
    "false",
]


def train_demo(tmp_path_factory, script: str, flags: list[str], metric: str):
    """Train on a built-in demo task with `flags` into a fresh temporary directory; `metric` must reach 0.95."""
    import importlib

    out = tmp_path_factory.mktemp(script) / "model"
    metrics = importlib.import_module(f"vanilla_transformer.{script}").main(["--output_dir", str(out), *flags])
    assert metrics[metric] >= 0.95, metrics
    return out


@pytest.fixture(scope="session")
def small_demo_model(tmp_path_factory):
    """A translation model trained on the demo task (shared by the deployment and documentation tests)."""
    return train_demo(tmp_path_factory, "run_translation", DEMO_FLAGS, "eval_exact_match")


# A small tagger on the demo NER task (person, place and organisation names): ~20 s of training, F1 ~1.0.
NER_DEMO_FLAGS = [
    "--config_overrides",
    "d_model=64,encoder_layers=2,encoder_ffn_dim=128,dropout=0.0",
    "--max_steps",
    "150",
    "--warmup_steps",
    "20",
    "--learning_rate",
    "3e-3",
    "--demo_train_examples",
    "2000",
    "--demo_eval_examples",
    "100",
    "--disable_tqdm",
    "true",
    "--bf16",
    "false",
    "--do_predict",
    "false",
]


@pytest.fixture(scope="session")
def small_ner_model(tmp_path_factory):
    """A tagger trained on the demo NER task (shared by the demo-page tests)."""
    return train_demo(tmp_path_factory, "run_ner", NER_DEMO_FLAGS, "eval_f1")


def chrome():
    """Headless Chromium through Selenium, or a skip naming what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [test] extra)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("Chromium and its driver are not installed (Debian: apt-get install chromium chromium-driver)")
    options = Options()
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1300,1000"):
        options.add_argument(flag)
    options.binary_location = browser
    return webdriver.Chrome(service=Service(driver), options=options)


def wait_for(condition, timeout=60.0, what="the page"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


# ------------------------------------------------------------------------------------------------ serving
class FakeEngine:
    """The engine's interface without a model: a translation is the sentence reversed (the k-th alternative with
    " #k" after it); `fail_on` raises for a batch holding that sentence; `delay` seconds per call; `loaded` gates the
    loading."""

    def __init__(
        self, delay: float = 0.0, fail_on: str | None = None, workers: int = 1, source="de", target="en", reverse=True
    ):
        self.model_dir, self.error, self.delay, self.fail_on, self.workers = "fake", None, delay, fail_on, workers
        self.source, self.target, self.name, self.reverse = source, target, f"{source}-{target}", reverse
        self.ready, self.loaded, self.batches = threading.Event(), threading.Event(), []
        self.loaded.set()
        self.running = self.most_running = 0  # calls at the same time
        self.lock = threading.Lock()

    def load(self):
        self.loaded.wait()
        self.ready.set()

    def count_tokens(self, texts):
        return [len(t.split()) + 1 for t in texts]

    def process(self, texts, options):
        num_beams, max_new_tokens, n = options
        with self.lock:
            self.batches.append(list(texts))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        time.sleep(self.delay)
        with self.lock:
            self.running -= 1
        if self.fail_on in texts:
            raise RuntimeError("engine crashed")
        outputs = [t[::-1] if self.reverse else f"{self.target}({t})" for t in texts]
        return [[out] + [f"{out} #{k}" for k in range(1, n)] for out in outputs]


def client_for(engine, *others, api_key=None, **settings):
    """A test client of the app serving `engine` (and `others`) with these Settings fields (metrics on)."""
    from fastapi.testclient import TestClient

    from vanilla_transformer.deploy.server.app import Settings, create_app

    settings.setdefault("metrics", True)  # the tests read /metrics (off by default)
    if api_key:
        settings["api_keys"] = {api_key: None}
    return TestClient(create_app([engine, *others], Settings(**settings)))


def wait_ready(client):
    for _ in range(200):
        if client.get("/health").status_code == 200:
            return
        time.sleep(0.02)
    raise AssertionError("not ready")


def start_server(model_dir, *flags):
    """`vanilla-transformer serve MODEL_DIR` (PyTorch, CPU) in a child process on a free port, once healthy:
    (process, URL)."""
    port = free_port()
    env = {name: value for name, value in os.environ.items() if name != "VT_API_KEY"}  # (an empty one is refused)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vanilla_transformer.cli",
            "serve",
            str(model_dir),
            "--port",
            str(port),
            "--engine",
            "pytorch",
            "--device",
            "cpu",
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                if response.status == 200:
                    return proc, url
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read())
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the server did not become ready")


def post_json(url, body, timeout=60):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


# Debian's nginx in front of a server: the X-Forwarded-For a deployment sets (the client's header, then the address
# nginx was connected from), besides the usual Host, X-Real-IP and X-Forwarded-Proto.
NGINX_PROXY_HEADERS = """proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Real-IP $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;"""


@pytest.fixture
def nginx(tmp_path):
    """`nginx(upstream_url, directives=NGINX_PROXY_HEADERS)`: Debian's nginx as a reverse proxy to `upstream_url` on
    a free loopback port, `directives` in its one location; its URL once it accepts connections. Root not needed (the
    config, pid, logs and temporary files in tmp_path); stopped after the test; a skip where nginx is absent."""
    binary = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"]))
    if binary is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    started = []

    def start(upstream: str, directives: str = NGINX_PROXY_HEADERS) -> str:
        port = free_port()
        folder = tmp_path / f"nginx-{port}"
        folder.mkdir()
        temp = "\n    ".join(
            f'{kind}_temp_path "{folder / kind}";' for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (folder / "nginx.conf").write_text(f"""{"user root;" if os.geteuid() == 0 else ""}
worker_processes 1;
pid "{folder / "nginx.pid"}";
error_log "{folder / "error.log"}";
events {{ worker_connections 64; }}
http {{
    access_log off;
    {temp}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass {upstream};
            {directives}
        }}
    }}
}}
""")
        proc = subprocess.Popen(
            [
                binary,
                "-p",
                str(folder),
                "-c",
                str(folder / "nginx.conf"),
                "-e",
                str(folder / "error.log"),
                "-g",
                "daemon off;",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        started.append(proc)
        import socket

        for _ in range(200):
            if proc.poll() is not None:
                raise AssertionError(f"nginx exited: {(folder / 'error.log').read_text()}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return f"http://127.0.0.1:{port}"
            time.sleep(0.05)
        raise AssertionError("nginx did not listen")

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)


def exchange(connection, method, path, body=b"", headers=()):
    """One request on `connection` (an `http.client` connection), `headers` a list of (name, value), the same name
    possibly several times, a Host among them sent instead of the connection's: (status, headers, body)."""
    try:
        connection.putrequest(method, path, skip_accept_encoding=True, skip_host=any(n == "Host" for n, _ in headers))
        for name, value in headers:
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def loopback_sources(*addresses):
    """`addresses`, or a skip where those besides 127.0.0.1 cannot be bound (Linux routes all of 127/8 to lo)."""
    for address in addresses:
        with socket.socket() as sock:
            try:
                sock.bind((address, 0))
            except OSError:
                pytest.skip(f"{address} cannot be bound here (several loopback clients need Linux's 127/8)")
    return list(addresses)
