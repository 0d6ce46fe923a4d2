"""Optional dependencies, imported only by the commands that need them: ``require_torch`` imports
PyTorch or raises one line naming the extra to install (and, for a machine without a GPU, that the
CPU build goes in first: a bare ``pip install torch`` on Linux is the several-GB CUDA build)."""

from __future__ import annotations

from roofline.errors import RooflineError

TORCH_EXTRA = "pip install 'roofline[torch]'"
TORCH_CPU_HINT = ("on a machine without a GPU install the CPU build first: "
                  "pip install torch --index-url https://download.pytorch.org/whl/cpu")


def require_torch(what: str = "this"):
    """Import torch, or raise a RooflineError naming the extra to install (docs/development.md)."""
    try:
        import torch
    except ImportError:
        raise RooflineError(f"{what} needs PyTorch: {TORCH_EXTRA} ({TORCH_CPU_HINT})", field="torch") from None
    return torch
