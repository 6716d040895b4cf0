"""The demo page (Gradio): `vanilla-transformer demo`, and the app of a pushed Space."""

from .app import build_app

__all__ = ["build_app"]
