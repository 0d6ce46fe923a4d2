"""Old path of roofline.cli.plan_args (count_list), kept for tests/test_plan_cli.py."""

from roofline.cli.plan_args import count_list

__all__ = ["count_list"]
