"""The one error the server answers with: JSON `{"error": message}`, a status and headers."""


class ServeError(Exception):
    """An error answered as JSON `{"error": message}` with `status` (and `headers`)."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}
