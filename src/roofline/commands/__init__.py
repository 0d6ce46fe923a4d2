"""Extension commands of the `roofline` CLI: each module has register(subparsers)."""
