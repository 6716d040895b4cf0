"""Who may call a server and how often, as LibreTranslate's options say: API keys (`--api_key`, and `--api-keys FILE`
as its key database: one key a line, optionally followed by that key's requests per minute), request limits per
client (its key, else its address) per minute, hour and day (`--req-limit`, `--hourly-req-limit`,
`--daily-req-limit`: 429 with Retry-After beyond), a ban for a client that keeps going past them
(`--req-flood-threshold`: 403), and where the counts live (`--req-limit-storage`: this process's memory, or a Redis
that every server process shares and that outlives a restart)."""

import collections
import hashlib
import hmac
import logging
import secrets
import threading
import time

from ..files import read_lines
from .batcher import ServeError

logger = logging.getLogger(__name__)

WINDOWS = {"minute": 60, "hour": 3600, "day": 86400}
FORGIVE_AFTER = 600  # seconds after its last offence that a client is forgiven (LibreTranslate: 10 minutes)
STORAGE_SCHEMES = ("memory://", "redis://", "rediss://", "unix://")


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


def check_storage_uri(uri: str) -> str:
    """`memory://` or a Redis URL (`redis://HOST:PORT[/DB]`, `rediss://`, `unix://`), else a ValueError naming it."""
    if uri == "memory://":
        return uri
    if not uri.startswith(STORAGE_SCHEMES[1:]):
        raise ValueError(f"--req-limit-storage {uri!r}: expected memory:// or redis://HOST:PORT")
    from ..loading import require

    redis = require("redis", "serve")

    try:
        redis.ConnectionPool.from_url(uri)
    except ValueError as error:
        raise ValueError(f"--req-limit-storage {uri!r}: {error}") from None
    return uri


def storage_name(uri: str) -> str:
    """The storage without a password a Redis URL may carry (for log lines and errors)."""
    if "@" in uri:
        scheme, rest = uri.split("://", 1)
        return f"{scheme}://{rest.rsplit('@', 1)[1]}"
    return uri


class MemoryCounts:
    """Request times and offence counts in this process (`--req-limit-storage memory://`)."""

    def __init__(self):
        self.times: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self.offence_counts: dict[str, tuple[int, float]] = {}  # address -> (offences, forgiven at)
        self.lock, self.swept = threading.Lock(), 0.0

    async def hit(self, counters: list[tuple[str, int, float]]) -> tuple[int, float]:
        """Count one request in every `(key, limit, window seconds)` counter unless one already holds `limit`
        requests of its last window: (the index of that one, seconds until it has room), else (-1, 0) and every
        counter has counted it."""
        now = time.monotonic()
        with self.lock:
            for i, (key, limit, window) in enumerate(counters):
                times = self.times[key]
                while times and times[0] <= now - window:
                    times.popleft()
                if len(times) >= limit:
                    return i, times[0] + window - now
            for key, _, _ in counters:
                self.times[key].append(now)
            if len(self.times) > 10_000 and now - self.swept > 60:  # clients gone quiet are forgotten (once a
                self.swept = now                                       # minute): many clients do not grow the table
                for key in [key for key, times in self.times.items() if not times or times[-1] <= now - 86400]:
                    del self.times[key]
                for key in [key for key, (_, until) in self.offence_counts.items() if until <= now]:
                    del self.offence_counts[key]
            return -1, 0.0

    async def offend(self, key: str, ttl: float) -> None:
        now = time.monotonic()
        with self.lock:
            count = self.offence_counts.get(key, (0, 0.0))
            self.offence_counts[key] = ((count[0] if count[1] > now else 0) + 1, now + ttl)

    async def offences(self, key: str) -> int:
        with self.lock:
            count, until = self.offence_counts.get(key, (0, 0.0))
            return count if until > time.monotonic() else 0

    async def close(self) -> None:
        pass


# KEYS: sorted sets of request times (ms, Redis' clock: the same for every server sharing it); ARGV: per key its
# limit and window (ms), then a name for this request. Every key below its limit: the request joins all of them.
HIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  local limit, window = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  if redis.call('ZCARD', KEYS[i]) >= limit then
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')[2]
    return {i - 1, tonumber(oldest) + window - now}
  end
end
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now, ARGV[#ARGV])
  redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
end
return {-1, 0}
"""


class RedisCounts:
    """The same in Redis (`--req-limit-storage redis://HOST:PORT`): shared by every server process that names it, kept
    across restarts; each check is one atomic script, so a limit holds exactly under any concurrency."""

    def __init__(self, uri: str):
        import redis.asyncio

        self.uri = uri
        self.client = redis.asyncio.Redis.from_url(uri, socket_timeout=5, socket_connect_timeout=5)
        self.script = self.client.register_script(HIT)
        self.down = False

    async def call(self, coroutine):
        import redis

        try:
            result = await coroutine
        except (redis.ConnectionError, redis.TimeoutError, OSError) as error:
            if not self.down:  # one line when it goes down, one when it is back
                logger.error("request limits: the Redis at %s cannot be reached (%s); limited requests are answered "
                             "503 until it is back", storage_name(self.uri), error)
            self.down = True
            raise ServeError(503, "the request limit storage cannot be reached; try again shortly",
                             {"Retry-After": "5"}) from None
        if self.down:
            logger.warning("request limits: the Redis at %s is back", storage_name(self.uri))
            self.down = False
        return result

    async def hit(self, counters: list[tuple[str, int, float]]) -> tuple[int, float]:
        args = [value for _, limit, window in counters for value in (limit, int(window * 1000))]
        over, wait_ms = await self.call(self.script(keys=[key for key, *_ in counters],
                                                    args=[*args, secrets.token_hex(8)]))
        return int(over), int(wait_ms) / 1000

    async def offend(self, key: str, ttl: float) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.incr(key)
        pipe.pexpire(key, int(ttl * 1000))
        await self.call(pipe.execute())

    async def offences(self, key: str) -> int:
        return int(await self.call(self.client.get(key)) or 0)

    async def close(self) -> None:
        await self.client.aclose()


def fingerprint(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def open_counts(uri: str):
    return MemoryCounts() if uri == "memory://" else RedisCounts(uri)


def ping(uri: str) -> None:
    """An OSError naming the storage where a Redis cannot be reached (before a server starts)."""
    if uri == "memory://":
        return
    import redis

    try:
        redis.Redis.from_url(uri, socket_timeout=5, socket_connect_timeout=5).ping()
    except (redis.RedisError, OSError) as error:
        raise OSError(f"--req-limit-storage {storage_name(uri)}: cannot reach Redis ({error})") from None


class Access:
    """`await check(key, client)`: a server with keys needs one of them (403 otherwise); then each limit in
    `limits` (per window name: requests at most; a key's own limit replaces the minute's) bounds the requests of the
    key, else the client address, in any window of that length (429 "Slowdown: N per 1 minute" with Retry-After).
    Each 429 is an offence of the address; with `flood_threshold` > 0 an address with that many, none forgiven yet
    (`FORGIVE_AFTER` seconds after its last), is refused 403."""

    def __init__(self, keys: dict[str, int | None], limits: dict[str, int] | None = None, flood_threshold: int = -1,
                 storage: str = "memory://"):
        self.keys, self.flood_threshold, self.storage = keys, flood_threshold, storage
        self.limits = {window: limit for window, limit in (limits or {}).items() if limit >= 0}
        self.counts = None

    def open(self) -> None:
        """The counters' storage, opened in the event loop that serves (a Redis client belongs to one loop)."""
        self.counts = open_counts(self.storage)

    async def close(self) -> None:
        if self.counts is not None:
            await self.counts.close()

    def key_of(self, given) -> str | None:
        """The server's key that `given` is (compared in constant time), else None."""
        if not isinstance(given, str):
            return None
        found = None
        for key in self.keys:
            if hmac.compare_digest(given.encode(), key.encode()):
                found = key
        return found

    def limits_of(self, key: str | None) -> dict[str, int]:
        own = self.keys.get(key) if key is not None else None
        return {**self.limits, "minute": own} if own else self.limits

    async def check(self, given, client: str) -> None:
        key = None
        if self.keys:
            key = self.key_of(given)
            if key is None:
                raise ServeError(403, "Invalid API key")
        limits = self.limits_of(key)
        if not limits and self.flood_threshold <= 0:
            return
        if self.counts is None:
            self.open()
        offences = f"vt:offences:{client}"
        if self.flood_threshold > 0 and await self.counts.offences(offences) >= self.flood_threshold:
            raise ServeError(403, "Too many request limits violations")
        who = f"key:{fingerprint(key)}" if key is not None else f"client:{client}"  # (a key itself is never stored)
        counters = [(f"vt:limit:{who}:{window}", limit, WINDOWS[window]) for window, limit in limits.items()]
        over, wait = await self.counts.hit(counters)
        if over >= 0:
            if self.flood_threshold > 0:
                await self.counts.offend(offences, FORGIVE_AFTER)
            window, limit = list(limits.items())[over]
            raise ServeError(429, f"Slowdown: {limit} per 1 {window}", {"Retry-After": str(max(1, int(wait + 0.999)))})
