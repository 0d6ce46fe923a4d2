"""`roofline serve`: the web workshop (docs/workshop.md) on a local port. The web stack is imported only when
the command runs, so the rest of the CLI works without the `web` extra."""

from __future__ import annotations

from roofline.cli.args import number_arg


def cmd_serve(args):
    from roofline.web import serve

    serve(host=args.host, port=args.port, machine_files=args.machine or None)


def register(sub):
    p = sub.add_parser("serve", help="the web workshop: a layer op by op, the whole model, decode, serving and exercises, live "
                                        "(needs the web extra)",
                       description="Start the workshop on http://HOST:PORT/ (Ctrl-C stops it). "
                                   "Install it with: pip install 'roofline[web]'")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, this machine only)")
    p.add_argument("--port", type=number_arg("--port", integer=True, maximum=65535), default=8000,
                   help="TCP port (default 8000)")
    p.add_argument("--machine", action="append", metavar="FILE", default=[],
                   help="a machine TOML file whose machines join the presets in the page (repeatable)")
    p.set_defaults(func=cmd_serve)
