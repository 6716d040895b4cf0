"""What a server's routes share, typed once: `create_app` builds it, every route reads it with `server(request)`."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (annotations only: the modules below import this one)
    from .access import Access
    from .batcher import DynamicBatcher
    from .downloads import TranslatedFiles
    from .languages import Detector, Pairs
    from .prometheus import Metrics
    from .settings import Settings


@dataclass
class ServerState:
    settings: "Settings"
    pairs: "Pairs"  # the served language pairs and their routes
    engines: dict  # name ("de-en", "ner") -> engine
    detector: "Detector"
    access: "Access"
    files: "TranslatedFiles"  # translated files waiting for their download
    metrics: "Metrics"
    batchers: "dict[str, DynamicBatcher]" = field(default_factory=dict)  # by engine name, while the app runs


def server(request) -> ServerState:
    """The state of the server `request` came to."""
    return request.app.state.server
