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
import os
import re
import secrets
import stat
import threading
import time

from ...files import read_lines
from .errors import ServeError
from .settings import KEY_FORM

logger = logging.getLogger(__name__)

WINDOWS = {"minute": 60, "hour": 3600, "day": 86400}
KEY_FILE_BYTES = 64 << 20  # a key file's size at most (read whole, at start and on SIGHUP)
FORGIVE_AFTER = 600  # seconds after its last offence that a client is forgiven (LibreTranslate: 10 minutes)
STORAGE_SCHEMES = ("memory://", "redis://", "rediss://", "unix://")


def read_api_keys(path) -> dict[str, int | None]:
    """The keys of a key file: `KEY` or `KEY REQUESTS_PER_MINUTE` a line; blank lines and `#` comments (a `#` at a
    line's start or after a space or tab: one inside a key is part of it, as --api_key takes it) skipped; UTF-8,
    a byte-order mark and CRLF line ends read as no text. A bad line is a ValueError naming the file and line (never
    the key); an empty path (an unset shell variable) is refused, never read as no keys; so is anything but a regular
    file (a directory; a device or a pipe, which would never end), and a file over `KEY_FILE_BYTES`."""
    if not str(path).strip() or str(path) == "-":
        raise ValueError(f"{str(path)!r}: give the key file's path (one key a line)")
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such key file") from None
    if stat.S_ISDIR(status.st_mode):
        raise ValueError(f"{path}: a directory, not a key file")
    if not stat.S_ISREG(status.st_mode):
        raise ValueError(f"{path}: not a regular file (a device, pipe or socket), not a key file")
    if status.st_size > KEY_FILE_BYTES:
        raise ValueError(f"{path}: {status.st_size} bytes, over the {KEY_FILE_BYTES >> 20} MiB a key file may hold")
    keys: dict[str, int | None] = {}
    for number, line in enumerate(read_lines(path, allow_empty=True), 1):
        if re.search(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]", line):  # (tabs separate a key from its limit)
            raise ValueError(
                f"{path}, line {number}: a control character; a line is `KEY` or `KEY REQUESTS_PER_MINUTE`"
            )
        words = re.split(r"(?:^|(?<=\s))#", line, maxsplit=1)[0].split()  # (a `#` inside a key is the key's)
        if not words:
            continue
        if len(words) > 2 or (len(words) == 2 and not (re.fullmatch(r"[0-9]{1,15}", words[1]) and int(words[1]) > 0)):
            raise ValueError(
                f"{path}, line {number}: expected `KEY` or `KEY REQUESTS_PER_MINUTE` (a positive whole number)"
            )
        if not KEY_FORM.fullmatch(words[0]):
            raise ValueError(
                f"{path}, line {number}: a key is 1-1000 printable ASCII characters without spaces (it "
                "travels in an HTTP header)"
            )
        if words[0] in keys:
            raise ValueError(f"{path}, line {number}: this key is already on an earlier line")
        keys[words[0]] = int(words[1]) if len(words) == 2 else None
    if not keys:
        raise ValueError(f"{path} holds no API key (one key a line)")
    return keys


# A Redis URL's query arguments whose values are never secret (numbers and switches redis-py reads); every other
# value (`?password=`, `?username=`, ...) is hidden like the URL's user and password
PLAIN_QUERY = (
    "db",
    "socket_timeout",
    "socket_connect_timeout",
    "socket_read_size",
    "socket_keepalive",
    "retry_on_timeout",
    "max_connections",
    "health_check_interval",
    "ssl_check_hostname",
    "timeout",
    "protocol",
)
ENCODE = "percent-encode a password's @ as %40, : as %3A, / as %2F, ? as %3F, # as %23, & as %26"


def redis_url(uri: str) -> tuple[str, set[str]]:
    """A Redis URL read as redis-py reads it: (its name for log and error lines: scheme, host, port, database or
    socket, without user, password or secret query values; the secrets it holds: user, password and the values of
    query arguments other than PLAIN_QUERY's, each as written, percent-decoded and as repr() shows it). A URL that
    redis-py would read otherwise than it looks (an '@' or '#' past the host: a password's reserved characters not
    percent-encoded, which would send part of it as a host, port or path), or cannot read, is a ValueError naming the
    problem, never any part of the value."""
    from urllib.parse import unquote, unquote_plus, urlsplit

    scheme, sep, _ = uri.partition("://")
    if not sep or f"{scheme.lower()}://" not in STORAGE_SCHEMES[1:]:
        raise ValueError(
            "expected memory://, redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB] or unix:///SOCKET[?db=DB]"
        )
    if not uri.isprintable() or any(character.isspace() for character in uri):
        raise ValueError(f"a space or control character in the URL ({ENCODE}, a space as %20)")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (read: a port that is not a number is a ValueError now)
    except ValueError as error:  # (its text may quote the password: never shown)
        problem = (
            "an IPv6 host without its closing ]"
            if "IPv6" in str(error)
            else "a character Unicode normalisation changes"
            if "NFKC" in str(error)
            else "the port is not a number from 0 to 65535"
        )
        raise ValueError(f"not a URL redis-py can read: {problem} ({ENCODE})") from None
    if "@" in parts.path + parts.query or "#" in uri or parts.netloc.count("@") > 1:
        raise ValueError(f"an '@' or '#' in the user, password or after the host ({ENCODE})")
    userinfo, _, host = parts.netloc.rpartition("@")
    hidden = [userinfo, *userinfo.split(":", 1)] if userinfo else []
    shown = []
    for argument in filter(None, parts.query.split("&")):
        key, equals, value = argument.partition("=")
        name = unquote_plus(key)
        if not equals:  # (redis-py skips it; it may be the end of a password holding an '&')
            hidden.append(argument)
        elif name in PLAIN_QUERY and value.replace(".", "").isalnum():
            shown.append(argument)
        else:  # a name redis-py does not know may be the middle of such a password too
            hidden += [value] if name in (*PLAIN_QUERY, "password", "username") else [value, key]
    found = {form for text in hidden if text for form in (text, unquote(text), unquote_plus(text))}
    found |= {repr(text)[1:-1] for text in found}
    return f"{scheme}://{host}{parts.path}" + (f"?{'&'.join(shown)}" if shown else ""), found - {""}


def without_secrets(text: str, hidden) -> str:
    """`text` (an error's message, which may echo parts of a URL) with each of `hidden` replaced by ***."""
    for secret in sorted(hidden, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def check_storage_uri(uri: str) -> str:
    """`memory://` or a Redis URL (`redis://HOST:PORT[/DB]`, `rediss://`, `unix://`) that redis-py reads as it looks,
    with arguments it takes, else a ValueError naming the problem and the storage without its secrets."""
    if uri == "memory://":
        return uri
    try:
        _, hidden = redis_url(uri)
    except ValueError as error:
        raise ValueError(f"--req-limit-storage {storage_name(uri)}: {error}") from None
    from ...loading import require

    redis = require("redis", "serve")

    try:  # a query argument redis-py does not take, or a value it refuses, fails here, not at the first request
        redis.ConnectionPool.from_url(uri).make_connection()
    except (ValueError, redis.RedisError) as error:  # (its text may quote a value: a secret one shown as ***)
        raise ValueError(f"--req-limit-storage {storage_name(uri)}: {without_secrets(str(error), hidden)}") from None
    except TypeError:  # (its text names the argument, which may be the middle of a password holding an '&')
        raise ValueError(
            f"--req-limit-storage {storage_name(uri)}: a query argument redis-py does not take (such "
            f"as {', '.join(PLAIN_QUERY[:3])}, password, username; {ENCODE})"
        ) from None
    return uri


def storage_name(uri: str) -> str:
    """The storage as log and error lines name it: a Redis URL without its user, password and secret query values;
    one that cannot be read so, only its scheme (never a part that could be a password)."""
    if uri == "memory://" or (uri.isprintable() and not set("@?#") & set(uri)):  # (no password can hide in it)
        return uri
    try:
        return redis_url(uri)[0]
    except ValueError:
        scheme, sep, _ = uri.partition("://")
        return f"{scheme}://…" if sep and scheme.isalnum() else "(the value given, not shown: it may hold a password)"


class MemoryCounts:
    """Request times and offence counts in this process (`--req-limit-storage memory://`)."""

    def __init__(self):
        self.times: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self.windows: dict[str, float] = {}  # key -> its window (seconds): a key idle for as long is forgotten
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
                if len(times) >= limit:  # (a limit of 0, which Access never passes, holds no request: a full window)
                    return i, (times[0] + window - now) if times else window
            for key, _, window in counters:
                self.times[key].append(now)
                self.windows[key] = window
            if len(self.times) > 10_000 and now - self.swept > 60:  # clients gone quiet are forgotten (once a minute)
                self.swept = now  # after their window: many do not grow the table
                for key in [
                    key for key, times in self.times.items() if not times or times[-1] <= now - self.windows.get(key, 0)
                ]:
                    del self.times[key]
                    self.windows.pop(key, None)
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
# limit and window (ms), then a name for this request. Every key below its limit: the request joins all of them. It
# starts with a command a full Redis (maxmemory, noeviction) refuses and that changes nothing (ZADD XX of a name not
# there yet): Redis lets a script that has written once write on past maxmemory, so a removal first would.
HIT = """
redis.call('ZADD', KEYS[1], 'XX', 0, ARGV[#ARGV])
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


def redis_client(uri: str, asynchronous: bool = True):
    """A redis-py client of `uri` (asyncio's, or the blocking one): 5 s to connect and to answer unless the URL says
    (`?socket_timeout=SECONDS`), and one retry on a new connection where a pooled one was dropped (a Redis restarted,
    CLIENT KILL), so neither shows; a slow Redis is not asked twice."""
    import redis
    import redis.asyncio
    import redis.asyncio.retry
    import redis.backoff
    import redis.retry

    retry = (redis.asyncio.retry.Retry if asynchronous else redis.retry.Retry)(
        redis.backoff.NoBackoff(), 1, (redis.ConnectionError,)
    )
    return (redis.asyncio.Redis if asynchronous else redis.Redis).from_url(
        uri, socket_timeout=5, socket_connect_timeout=5, retry=retry
    )


UNREACHABLE = "cannot be reached"


def redis_fault(error: Exception) -> str:
    """What a Redis did wrong, from redis-py's exception, in words for a log or error line."""
    import redis.exceptions as failed

    if isinstance(error, (failed.AuthenticationError, failed.NoPermissionError)) or str(error).startswith(
        ("NOAUTH", "WRONGPASS")
    ):
        return "refuses this server (a wrong or missing password or user, or a command not allowed)"
    for kind, words in (
        (failed.ReadOnlyError, "is read-only (a replica)"),
        (failed.OutOfMemoryError, "is out of memory (maxmemory, no eviction)"),
        (failed.TimeoutError, "did not answer in time (the URL's socket_timeout, 5 s by default)"),
        (failed.BusyLoadingError, "is loading its data"),
        ((failed.ConnectionError, OSError), UNREACHABLE),
    ):
        if isinstance(error, kind):
            return words
    return "answered with an error or a reply of the wrong type"


class RedisCounts:
    """The same in Redis (`--req-limit-storage redis://HOST:PORT`): shared by every server process that names it, kept
    across restarts; each check is one atomic script, so a limit holds exactly under any concurrency."""

    def __init__(self, uri: str):
        check_storage_uri(uri)
        self.name, self.hidden = redis_url(uri)
        self.client = redis_client(uri)
        self.script = self.client.register_script(HIT)
        self.fault = None  # what is wrong with the Redis, while something is

    async def call(self, coroutine, read):
        """`read(await coroutine)`. Any failure of the Redis (down, read-only, out of memory, too slow, a refused
        password, a dropped connection, an error or a reply of the wrong type) is a 503 with Retry-After, never a 500,
        and one log line when it starts (another if it changes, one when it is over); no line holds a secret."""
        import redis

        try:
            result = read(await coroutine)
        except (redis.RedisError, OSError, ValueError, TypeError, IndexError) as error:
            fault = redis_fault(error)
            if fault != self.fault:
                logger.error(
                    "request limits: the Redis at %s %s (%s: %s); limited requests are answered 503 until it is back",
                    self.name,
                    fault,
                    type(error).__name__,
                    without_secrets(" ".join(str(error).split()), self.hidden),
                )
            self.fault = fault
            raise ServeError(
                503, "the request limit storage is unavailable; try again shortly", {"Retry-After": "5"}
            ) from None
        if self.fault is not None:
            logger.warning("request limits: the Redis at %s is back", self.name)
            self.fault = None
        return result

    async def hit(self, counters: list[tuple[str, int, float]]) -> tuple[int, float]:
        args = [value for _, limit, window in counters for value in (limit, int(window * 1000))]

        def read(reply) -> tuple[int, float]:  # (a reply of another shape is a ValueError: the Redis' fault)
            over, wait_ms = (int(value) for value in reply)
            if not (-1 <= over < len(counters) and wait_ms >= 0):
                raise ValueError(f"the script answered {over}, {wait_ms}")
            return over, wait_ms / 1000

        return await self.call(
            self.script(keys=[key for key, *_ in counters], args=[*args, secrets.token_hex(8)]), read
        )

    async def offend(self, key: str, ttl: float) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.incr(key)
        pipe.pexpire(key, int(ttl * 1000))
        await self.call(pipe.execute(), list)

    async def offences(self, key: str) -> int:
        return await self.call(self.client.get(key), lambda value: int(value or 0))

    async def close(self) -> None:
        await self.client.aclose()


def fingerprint(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def open_counts(uri: str):
    return MemoryCounts() if uri == "memory://" else RedisCounts(uri)


def ping(uri: str) -> None:
    """Before a server starts: an OSError naming the storage (never its secrets) and what is wrong where a Redis
    cannot be reached, refuses this server, is read-only or out of memory, or cannot run the limits' script (a
    probe runs it once, on a key of its own that expires in a second)."""
    if uri == "memory://":
        return
    import redis

    name, hidden = redis_url(check_storage_uri(uri))
    client = redis_client(uri, asynchronous=False)
    try:
        client.register_script(HIT)(keys=["vt:probe"], args=[1_000_000, 1000, secrets.token_hex(8)])
    except (redis.RedisError, OSError) as error:
        fault = redis_fault(error)
        raise OSError(
            f"--req-limit-storage {name}: "
            + ("cannot reach Redis" if fault == UNREACHABLE else f"the Redis {fault}")
            + f" ({type(error).__name__}: {without_secrets(str(error), hidden)})"
        ) from None
    finally:
        client.close()


class Access:
    """`await check(key, client)`: a server with keys needs one of them (403 otherwise); then each limit in
    `limits` (per window name: requests at most; a key's own limit replaces the minute's) bounds the requests of the
    key, else the client address, in any window of that length (429 "Slowdown: N per 1 minute" with Retry-After).
    Each 429 is an offence of the address; with `flood_threshold` > 0 an address with that many, none forgiven yet
    (`FORGIVE_AFTER` seconds after its last), is refused 403."""

    def __init__(
        self,
        keys: dict[str, int | None],
        limits: dict[str, int] | None = None,
        flood_threshold: int = -1,
        storage: str = "memory://",
    ):
        self.keys, self.flood_threshold, self.storage = keys, flood_threshold, storage
        # 0 and -1 are no limit, as in LibreTranslate (which builds no limiter for a 0, and adds no hourly or daily
        # limit unless it is over 0)
        self.limits = {window: limit for window, limit in (limits or {}).items() if limit > 0}
        self.counts = None
        self.reloading = threading.Lock()  # (two SIGHUPs at once: read one after the other, the later file wins)

    def reload_keys(self, path: str, fixed: str = "") -> bool:
        """The keys of the key file `path` (and `fixed`, --api_key's) in place of the server's (SIGHUP: a key added
        works and a key removed is refused from the next request on). A file that cannot be read as keys (a bad line,
        no keys, missing, unreadable) leaves the keys as they were and logs one error line naming the file and line,
        never a key: whether the file was taken."""
        with self.reloading:
            try:
                keys = read_api_keys(path)
            except (ValueError, OSError) as error:
                logger.error("SIGHUP: the API keys stay as they were: %s", error)
                return False
            if fixed:
                keys.setdefault(fixed, None)
            self.keys = keys
        logger.info("SIGHUP: %d API key(s) read from %s", len(keys), path)
        return True

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
        for key in self.keys:  # (a key sent in JSON may hold a lone surrogate: encoded as it is, never a match)
            if hmac.compare_digest(given.encode("utf-8", "surrogatepass"), key.encode()):
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
