"""The dynamic batcher of `serve`: sentences from concurrent requests grouped into engine batches, each sentence with
its own future, so a request gets back exactly its own outputs."""

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..engines import Options
from .errors import ServeError
from .prometheus import Metrics

logger = logging.getLogger(__name__)


@dataclass
class Item:
    text: str
    tokens: int
    options: Options  # the engine's (compared here, never read): only sentences of equal options share a batch
    future: asyncio.Future = field(repr=False)


class DynamicBatcher:
    """Sentences from concurrent requests -> engine batches of at most `max_batch_tokens` source tokens (and at least
    one sentence), collected for at most `max_wait` seconds after the first arrives. `process(texts, options)` runs in
    `workers` threads, one batch each (the next batch forms while they run); an exception
    fails that batch's sentences only. At most `max_queue` sentences wait: more is `ServeError(503)` with
    Retry-After."""

    def __init__(
        self, process, max_batch_tokens: int, max_wait: float, max_queue: int, metrics: Metrics, workers: int = 1
    ):
        self.process, self.max_batch_tokens, self.max_wait = process, max_batch_tokens, max_wait
        self.max_queue, self.metrics = max_queue, metrics
        self.queue: asyncio.Queue[Item] = asyncio.Queue()
        self.held: list[Item] = []  # taken from the queue, waiting for a batch with their options
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vt-engine")
        self.free = asyncio.Semaphore(workers)  # engine threads without a batch
        self.task: asyncio.Task | None = None
        self.running: set[asyncio.Task] = set()

    def waiting(self) -> int:
        return self.queue.qsize() + len(self.held)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, *self.running, return_exceptions=True)
        self.executor.shutdown(wait=True)

    async def submit(self, texts: list[str], tokens: list[int], options: Options) -> list:
        if self.waiting() + len(texts) > self.max_queue:
            self.metrics.count("vt_rejected_total")
            raise ServeError(
                503,
                f"the queue is full ({self.max_queue} sentences, --max_queue); try again shortly",
                {"Retry-After": "1"},
            )
        loop = asyncio.get_running_loop()
        items = [Item(t, n, options, loop.create_future()) for t, n in zip(texts, tokens)]
        for item in items:
            self.queue.put_nowait(item)
        try:
            return list(await asyncio.gather(*(item.future for item in items)))
        except BaseException:
            for item in items:  # cancelled (timeout, client gone) or failed: the worker skips what is left
                item.future.cancel()
            raise

    async def next_batch(self) -> list[Item]:
        first = self.held.pop(0) if self.held else await self.queue.get()
        batch, tokens = [first], first.tokens
        deadline = asyncio.get_running_loop().time() + self.max_wait
        for item in list(self.held):  # held items with these options first: they waited longest
            if item.options == first.options and tokens + item.tokens <= self.max_batch_tokens:
                self.held.remove(item)
                batch.append(item)
                tokens += item.tokens
        while tokens < self.max_batch_tokens:
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                if remaining <= 0:
                    item = self.queue.get_nowait()
                else:
                    item = await asyncio.wait_for(self.queue.get(), remaining)
            except (asyncio.QueueEmpty, TimeoutError):
                break
            if item.options != first.options or tokens + item.tokens > self.max_batch_tokens:
                self.held.append(item)
                if tokens + item.tokens > self.max_batch_tokens:
                    break
                continue
            batch.append(item)
            tokens += item.tokens
        return [item for item in batch if not item.future.done()]

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.free.acquire()  # a batch is formed only when an engine thread can take it
            batch = await self.next_batch()
            if not batch:
                self.free.release()
                continue
            task = loop.create_task(self.run_batch(batch))
            self.running.add(task)
            task.add_done_callback(self.running.discard)

    async def run_batch(self, batch: list[Item]) -> None:
        """One batch on an engine thread; its sentences' futures get their outputs, or all fail with a 500."""
        self.metrics.batch(len(batch))
        try:
            outputs = await asyncio.get_running_loop().run_in_executor(
                self.executor, self.process, [i.text for i in batch], batch[0].options
            )
            if len(outputs) != len(batch):
                raise RuntimeError(f"the engine returned {len(outputs)} outputs for {len(batch)} sentences")
        except Exception as error:  # noqa: BLE001 - this batch's requests fail with 500, the server goes on
            logger.exception("engine call failed for a batch of %d sentences", len(batch))
            self.metrics.count("vt_engine_errors_total")
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(ServeError(500, f"the model failed: {type(error).__name__}"))
            return
        finally:
            self.free.release()
        self.metrics.count("vt_sentences_total", len(batch))
        for item, text in zip(batch, outputs):
            if not item.future.done():
                item.future.set_result(text)
