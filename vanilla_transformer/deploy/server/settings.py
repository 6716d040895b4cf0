"""The limits and switches of a server, typed once: `serve`'s flags take their defaults from here."""

import re
from dataclasses import dataclass, field

# An API key or a token: printable ASCII without spaces (it travels in an HTTP header, which carries neither
# non-ASCII text nor a space inside a value), 1-1000 characters: `--api_key`, each key of `--api-keys FILE`,
# `--metrics-auth-token`
KEY_FORM = re.compile(r"[!-~]{1,1000}")


@dataclass
class Settings:
    """The server's limits and switches; `serve`'s flags take their defaults from here. -1: no limit (LibreTranslate's
    convention for its own limits)."""

    api_keys: dict = field(default_factory=dict)  # key -> its requests per minute (None: --req-limit)
    max_request_bytes: int = 1 << 20
    max_sentences: int = 128
    max_sentence_tokens: int = 256
    max_batch_tokens: int = 4096
    max_wait_ms: float = 0.0
    max_queue: int = 1024
    max_beams: int = 8
    request_timeout: float = 60.0
    cors_origins: tuple = ()
    char_limit: int = -1
    batch_limit: int = -1
    req_limit: int = -1
    hourly_req_limit: int = -1
    daily_req_limit: int = -1
    req_flood_threshold: int = -1
    req_limit_storage: str = "memory://"
    trust_forwarded_for: bool = False
    allowed_hosts: tuple = ()  # the Host names answered (any port; an IPv6 address in brackets); none: any
    url_prefix: str = ""
    metrics: bool = False
    metrics_auth_token: str = ""
    disable_web_ui: bool = False
    disable_files_translation: bool = False
    frontend_timeout: int = 500
    file_ttl: float = 600.0
    max_file_store_bytes: int = 256 << 20
