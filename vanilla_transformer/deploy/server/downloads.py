"""Translated files waiting for their one download (`/translate_file`, then `/download_file/...`), in memory."""

import secrets
import threading
import time

from .errors import ServeError


class TranslatedFiles:
    """Translated files waiting for their download, in memory: each is given once (then forgotten) within `ttl`
    seconds, at most `max_bytes` in all (more is a 503 until some are fetched or expire)."""

    def __init__(self, ttl: float, max_bytes: int):
        self.ttl, self.max_bytes = ttl, max_bytes
        self.files: dict[str, tuple[float, bytes]] = {}
        self.lock = threading.Lock()

    def expire(self, now: float) -> None:
        for name in [name for name, (until, _) in self.files.items() if until <= now]:
            del self.files[name]

    def put(self, filename: str, data: bytes) -> str:
        name = f"{secrets.token_hex(16)}.{filename}"
        with self.lock:
            now = time.monotonic()
            self.expire(now)
            if sum(len(held) for _, held in self.files.values()) + len(data) > self.max_bytes:
                raise ServeError(
                    503, "too many translated files wait for their download; try again shortly", {"Retry-After": "10"}
                )
            self.files[name] = (now + self.ttl, data)
        return name

    def take(self, name: str) -> bytes | None:
        with self.lock:
            self.expire(time.monotonic())
            found = self.files.pop(name, None)
        return None if found is None else found[1]
