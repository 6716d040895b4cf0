"""The server's metrics, in Prometheus' text format through `prometheus_client` (one registry per app): requests by
path and status with their latency, sentences served, engine batches and their sizes, engine errors, rejections and
the queue, plus the process's own (resident memory, CPU seconds, open files)."""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    """What a server counts; `render()` is the /metrics page; `queue_length()`: the sentences waiting now."""

    def __init__(self, queue_length=lambda: 0):
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        self.requests = Counter(
            "vt_requests", "HTTP responses by path and status.", ["path", "status"], registry=registry
        )
        self.latency = Histogram(
            "vt_request_seconds",
            "Seconds from request to response, by path.",
            ["path"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.batch_sentences = Histogram(
            "vt_batch_sentences", "Sentences per engine batch.", buckets=BATCH_BUCKETS, registry=registry
        )
        self.counters = {
            name: Counter(name, help_text, registry=registry)
            for name, help_text in (
                ("vt_sentences", "Sentences the engines answered."),
                ("vt_engine_errors", "Engine batches that failed."),
                ("vt_rejected", "Requests answered 503 because the queue was full."),
            )
        }
        queue = Gauge("vt_queue_sentences", "Sentences waiting for an engine batch.", registry=registry)
        queue.set_function(queue_length)

    def count(self, name: str, n: int = 1) -> None:
        """Add `n` to the counter `name` (vt_sentences_total, vt_engine_errors_total, vt_rejected_total)."""
        self.counters[name.removesuffix("_total")].inc(n)

    def request(self, path: str, status: int, seconds: float) -> None:
        self.requests.labels(path=path, status=str(status)).inc()
        self.latency.labels(path=path).observe(seconds)

    def batch(self, sentences: int) -> None:
        self.batch_sentences.observe(sentences)

    def render(self) -> bytes:
        return generate_latest(self.registry)
