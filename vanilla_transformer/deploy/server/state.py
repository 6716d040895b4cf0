"""What a server's routes share, typed once: `create_app` builds it (`ServerState`) and stores it on the app; every
route takes it as a parameter, `server: Server` (FastAPI's dependency `server_state`, the one place it is read)."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

if TYPE_CHECKING:  # (annotations only: the modules below import this one)
    from ..engines import ServedEngine
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
    engines: "dict[str, ServedEngine]"  # by name ("de-en", "ner")
    detector: "Detector"
    access: "Access"
    files: "TranslatedFiles"  # translated files waiting for their download
    metrics: "Metrics"
    batchers: "dict[str, DynamicBatcher]" = field(default_factory=dict)  # by engine name, while the app runs


def server_state(request: Request) -> ServerState:
    """The state of the server `request` came to (the dependency of `Server`)."""
    return request.app.state.server


Server = Annotated[ServerState, Depends(server_state)]  # a route's parameter `server: Server`: its server's state
