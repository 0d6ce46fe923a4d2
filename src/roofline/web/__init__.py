"""The web workshop (``roofline serve``, docs/workshop.md): the 'Predicting a Kernel's Time' plate as a local page over a JSON API.

The web stack (FastAPI, uvicorn, Plotly.js) is imported only here and only when the app is built,
so ``import roofline`` never needs it. Install it with ``pip install 'roofline[web]'``.
"""

from __future__ import annotations

from roofline.errors import RooflineError

_MISSING = "the web workshop needs fastapi, uvicorn and plotly: pip install 'roofline[web]' ({})"


def _app_module():
    try:
        from roofline.web import app
    except ImportError as exc:  # a missing extra is bad input to the CLI, not a traceback
        raise RooflineError(_MISSING.format(exc), field="web") from None
    return app


def create_app(machine_files: list[str] | None = None):
    """The FastAPI app; ``machine_files`` add machines from TOML files to the presets."""
    return _app_module().create_app(machine_files)


def serve(host: str = "127.0.0.1", port: int = 8000, machine_files: list[str] | None = None) -> None:
    """Run the workshop with uvicorn on ``host``:``port`` and print its URL."""
    return _app_module().serve(host=host, port=port, machine_files=machine_files)


__all__ = ["create_app", "serve"]
