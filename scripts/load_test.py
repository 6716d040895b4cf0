#!/usr/bin/env python
"""Load test for `vanilla-transformer serve`: at each concurrency, that many clients send one sentence per request to
POST /v1/translate (or `--endpoint /v1/ner`; with `--pairs`, a several-model server's pairs in turn), back to back,
until `--requests` requests are answered; then throughput (sentences/s), p50 / p99 latency, errors, the sentences the
server's engine batches held on average (from its /metrics) and its resident memory (with --pid). Loopback only,
bounded in count and time.

    vanilla-transformer serve MODEL_DIR --port 5000 &
    python scripts/load_test.py --url http://127.0.0.1:5000 --input sentences.txt --pid $! --concurrency 1 8 32 128

Several `--url`s spread the clients over several servers (sharing their limits through `--req-limit-storage`); each
level reports its answers by status (`statuses`: 200s, 429s, ...).
"""

import argparse
import asyncio
import json
import statistics
import time
import urllib.request
from urllib.parse import urlparse


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):  # not Linux, or the server is gone
        return None


def batch_totals(urls: list[str]) -> tuple[float, float] | None:
    """(engine batches, sentences in them) the servers have run so far, from their /metrics (`serve --metrics`);
    None where one has none."""
    batches = sentences = 0.0
    for url in urls:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=10) as response:
                lines = response.read().decode().splitlines()
        except OSError:
            return None
        values = dict(line.rsplit(" ", 1) for line in lines if line.startswith("vt_batch_sentences_"))
        batches += float(values.get("vt_batch_sentences_count", 0))
        sentences += float(values.get("vt_batch_sentences_sum", 0))
    return batches, sentences


async def post(reader, writer, host: str, body: bytes, path: str = "/v1/translate") -> tuple[int, bytes]:
    """One POST on a kept-alive HTTP/1.1 connection (plain asyncio streams: a client this light leaves the CPU to the
    server)."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    return status, await reader.readexactly(length)


async def run_level(
    urls: list[str],
    sentences: list[str],
    concurrency: int,
    requests: int,
    timeout: float,
    path: str = "/v1/translate",
    pairs: list[tuple[str, str]] | None = None,
) -> dict:
    latencies, errors, next_index = [], {}, iter(range(requests))

    async def client(parsed):
        reader = writer = None
        for i in next_index:
            fields = {"sentences": [sentences[i % len(sentences)]]}
            if pairs:
                fields["source"], fields["target"] = pairs[i % len(pairs)]
            body = json.dumps(fields).encode()
            start = time.perf_counter()
            try:
                if writer is None:
                    reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port or 80)
                status, _ = await asyncio.wait_for(post(reader, writer, parsed.netloc, body, path), timeout)
                if status == 200:
                    latencies.append(time.perf_counter() - start)
                    continue
                key = str(status)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as error:
                key, writer = type(error).__name__, None
            errors[key] = errors.get(key, 0) + 1
        if writer is not None:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client(urlparse(urls[k % len(urls)])) for k in range(concurrency)))
    seconds = time.perf_counter() - start
    latencies.sort()
    return dict(
        concurrency=concurrency,
        requests=requests,
        answered=len(latencies),
        errors=errors,
        seconds=seconds,
        sentences_per_second=len(latencies) / seconds,
        p50_ms=1000 * statistics.median(latencies) if latencies else None,
        p99_ms=1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else None,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--url",
        nargs="+",
        default=["http://127.0.0.1:5000"],
        help="The server, or several (servers sharing limits through Redis): clients spread over them.",
    )
    parser.add_argument("--input", required=True, help="Sentences to send, one per line (used in turn).")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--requests", type=int, default=400, help="Requests per concurrency level.")
    parser.add_argument("--timeout", type=float, default=60.0, help="Seconds a request may take.")
    parser.add_argument(
        "--endpoint",
        default="/v1/translate",
        choices=["/v1/translate", "/v1/ner"],
        help="The endpoint to load (/v1/ner: a server with a tagger).",
    )
    parser.add_argument(
        "--pairs",
        nargs="+",
        default=None,
        metavar="SOURCE-TARGET",
        help="Language pairs to ask for in turn (a server of several models); default: its one pair.",
    )
    parser.add_argument("--pid", type=int, default=None, help="The server's process id: report its resident memory.")
    parser.add_argument("--output", default=None, help="Write the results as JSON here too.")
    args = parser.parse_args(argv)
    if any(urlparse(url).hostname not in ("127.0.0.1", "localhost", "::1") for url in args.url):
        parser.error("--url must be a loopback address: this load test is not for servers of others")
    pairs = [tuple(pair.split("-", 1)) for pair in args.pairs or []]
    if any(len(pair) != 2 or not all(pair) for pair in pairs):
        parser.error("--pairs: each as SOURCE-TARGET, e.g. de-en")
    with open(args.input, encoding="utf-8") as f:
        sentences = [line.strip() for line in f if line.strip()]
    if not sentences:
        parser.error(f"{args.input}: no sentences")
    rows = []
    for concurrency in args.concurrency:
        before = batch_totals(args.url)
        row = asyncio.run(
            run_level(args.url, sentences, concurrency, args.requests, args.timeout, args.endpoint, pairs)
        )
        after = batch_totals(args.url)
        row["statuses"] = {"200": row["answered"], **row["errors"]}
        row["mean_batch_sentences"] = (
            (after[1] - before[1]) / (after[0] - before[0]) if before and after and after[0] > before[0] else None
        )
        row["server_rss_mb"] = rss_mb(args.pid)
        rows.append(row)
        print(
            f"concurrency {concurrency:4d}: {row['sentences_per_second']:7.1f} sentences/s  "
            f"p50 {row['p50_ms']:7.1f} ms"
            f"  p99 {row['p99_ms']:7.1f} ms  errors {sum(row['errors'].values())} {row['errors'] or ''}  "
            f"batches of {row['mean_batch_sentences'] or 0:.1f}  server RSS {row['server_rss_mb'] or 0:.0f} MB",
            flush=True,
        )
    if args.output:
        with open(args.output, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
