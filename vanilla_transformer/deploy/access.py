"""Who may call a server and how often: API keys (`--api_key`, and `--api-keys FILE` as LibreTranslate's key
database: one key a line, optionally followed by that key's requests per minute) and LibreTranslate's `--req-limit`
(requests per minute per client: its key, else its address; 429 with Retry-After beyond)."""

import collections
import hmac
import threading
import time

from ..files import read_lines
from .batcher import ServeError


def read_api_keys(path) -> dict[str, int | None]:
    """The keys of a key file: `KEY` or `KEY REQUESTS_PER_MINUTE` a line; blank lines and `#` comments skipped. A bad
    line is a ValueError naming the file and line (never the key); an empty path (an unset shell variable) is refused,
    never read as no keys."""
    if not str(path).strip():
        raise ValueError("--api-keys: an empty path; give the key file")
    keys: dict[str, int | None] = {}
    for number, line in enumerate(read_lines(path, allow_empty=True), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if len(words) > 2 or (len(words) == 2 and not (words[1].isdigit() and int(words[1]) > 0)):
            raise ValueError(f"{path}, line {number}: expected `KEY` or `KEY REQUESTS_PER_MINUTE` (a positive "
                             "whole number)")
        if words[0] in keys:
            raise ValueError(f"{path}, line {number}: this key is already on an earlier line")
        keys[words[0]] = int(words[1]) if len(words) == 2 else None
    if not keys:
        raise ValueError(f"{path} holds no API key (one key a line)")
    return keys


class Access:
    """`check(key, client)`: a server with keys needs one of them (403 otherwise); each key's own limit, else
    `req_limit` (-1: none), bounds its requests in any 60 seconds (429 with Retry-After)."""

    WINDOW = 60.0

    def __init__(self, keys: dict[str, int | None], req_limit: int = -1):
        self.keys, self.req_limit = keys, req_limit
        self.calls: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self.lock = threading.Lock()

    def key_of(self, given) -> str | None:
        """The server's key that `given` is (compared in constant time), else None."""
        if not isinstance(given, str):
            return None
        found = None
        for key in self.keys:
            if hmac.compare_digest(given.encode(), key.encode()):
                found = key
        return found

    def check(self, given, client: str) -> None:
        key = None
        if self.keys:
            key = self.key_of(given)
            if key is None:
                raise ServeError(403, "Invalid API key")
        limit = self.keys.get(key) if key is not None and self.keys.get(key) else self.req_limit
        if limit is None or limit < 0:
            return
        now, calls = time.monotonic(), self.calls[f"key:{key}" if key is not None else f"client:{client}"]
        with self.lock:
            while calls and calls[0] <= now - self.WINDOW:
                calls.popleft()
            if len(calls) >= limit:
                wait = max(1, int(calls[0] + self.WINDOW - now + 0.999))
                raise ServeError(429, f"Slowdown: {limit} per 1 minute", {"Retry-After": str(wait)})
            calls.append(now)
            if len(self.calls) > 10_000:  # clients gone quiet: forgotten, so many clients do not grow the table
                for name in [name for name, times in self.calls.items() if times[-1] <= now - self.WINDOW]:
                    del self.calls[name]
