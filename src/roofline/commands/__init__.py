"""Old home of the command modules, now roofline.cli; only the shim plan.py is left (tests/test_plan_cli.py
imports count_list from it)."""
