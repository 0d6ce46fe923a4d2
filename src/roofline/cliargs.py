"""Old path of roofline.cli.args, kept for tests/test_cli.py (shows_default)."""

from roofline.cli.args import shows_default

__all__ = ["shows_default"]
