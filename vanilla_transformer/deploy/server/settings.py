"""The limits and switches of a server, typed once: `serve`'s flags take their defaults from here, and the
LibreTranslate options `serve` refuses (`NOT_TAKEN`, with the defaults their variables may keep)."""

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
    api_keys_file: str = ""  # --api-keys FILE: re-read on SIGHUP (`app.key_reloader`)
    fixed_api_key: str = ""  # --api_key: kept through every re-read of the file
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


# LibreTranslate's options this server does not take, each refused by name with the reason
NOT_TAKEN = {
    "--load-only": "the server serves the models it is given",
    "--update-models": "models are the directories given",
    "--force-update-models": "models are the directories given",
    "--frontend-language-source": "the page starts with the first served pair",
    "--frontend-language-target": "the page starts with the first served pair",
    "--frontend-language": "the page is in English",
    "--frontend-title": "the page's title is fixed",
    "--frontend-timeout": "the page waits 500 ms after typing",
    "--suggestions": "suggestions are always off",
    "--ssl": "put TLS in the proxy in front",
    "--debug": "set VT_DEBUG=1 for traces",
    "--hide-api": "the API is the product",
    "--api-keys-db-path": "give the keys as --api-keys FILE",
    "--api-keys-remote": "give the keys as --api-keys FILE",
    "--get-api-key-link": "not supported",
    "--require-api-key-origin": "not supported",
    "--require-api-key-secret": "not supported",
    "--require-api-key-fingerprint": "not supported",
    "--under-attack": "use --req-limit and --req-flood-threshold",
    "--shared-storage": "give --req-limit-storage redis://HOST:PORT",
    "--secondary": "every server sharing a Redis is the same",
    "--alternatives-limit": "alternatives are bounded by --max_beams",
    "--hourly-req-limit-decay": "not supported",
    "--req-time-cost": "not supported",
    "--translation-cache": "not supported",
}
# their LT_* variables are refused too, unless set to LibreTranslate's default (these) or a false value
NOT_TAKEN_DEFAULTS = {
    "--frontend-language-source": "auto",
    "--frontend-language-target": "locale",
    "--frontend-timeout": "500",
    "--api-keys-db-path": "db/api_keys.db",
    "--shared-storage": "memory://",
    "--alternatives-limit": "-1",
    "--req-time-cost": "-1",
}
