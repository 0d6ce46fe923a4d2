"""The `roofline` parser's machinery: one-line errors, each option's default in --help, --version,
and deprecated flag spellings (args.py re-exports every name)."""

from __future__ import annotations

import argparse
import copy
import re

from roofline.errors import RooflineError


def shows_default(action) -> bool:
    """Whether --help should add this option's default: it has one worth saying (not None, False,
    an empty list or SUPPRESS) and its help does not already say one."""
    default = action.default
    if default is None or default is False or default is argparse.SUPPRESS or default == [] or action.help is argparse.SUPPRESS:
        return False
    if not action.option_strings and action.nargs not in ("?", "*"):
        return False  # a required positional has no default to show
    return "default" not in (action.help or "").lower()


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, "(default: 8192)", unless the help already
    states one or there is none: the one place every command's --help gets its defaults."""

    def _format_action(self, action):
        if shows_default(action):
            action = copy.copy(action)
            action.help = f"{action.help} (default: %(default)s)" if action.help else "default: %(default)s"
        return super()._format_action(action)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and negative numbers in any notation (-1e3, -5.0e-3, and with
    a unit, -5ms, -1us) read as values rather than flags, so their range check can name them;
    --help lists each option's default (DefaultsHelpFormatter)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)
        # -inf and -nan too: read as values, their check names them ("K must be a finite number, got -inf"),
        # where argparse took -inf for an unknown flag and said "required: K"
        self._negative_number_matcher = re.compile(r"^-((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[a-zA-Z\u00b5/]*"
                                                   r"|(?i:inf|infinity|nan))$")

    def error(self, message):  # one line, exit 2, no usage dump
        choice = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
        if choice:  # `roofline lyer`: the nearest names first
            from roofline.errors import close_names

            close = close_names(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
            if close:
                message = f"{message[:choice.start()]}invalid choice: {choice.group(1)!r}; did you mean " \
                          f"{', '.join(close)}? (choose from {choice.group(2)})"
        raise RooflineError(message)

    def _get_values(self, action, arg_strings):
        # Python 3.11's argparse drops a '--' given as an option's value (`--host=--`) and hands the
        # command an empty list: refuse it by name instead
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            raise RooflineError(f"argument {'/'.join(action.option_strings)}: expected a value, got '--'")
        return super()._get_values(action, arg_strings)


def package_version() -> str:
    """The installed package's version (its metadata), else the source tree's __version__."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("roofline")
    except PackageNotFoundError:
        from roofline import __version__

        return __version__


class VersionAction(argparse.Action):
    """--version: prints "roofline X.Y.Z" and exits 0; the version is looked up only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help="print the version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"roofline {package_version()}")
        parser.exit()


class DeprecatedAlias(argparse.Action):
    """An old spelling kept for one release: sets the new flag's value, hidden from --help, and
    leaves a note in ``deprecation_notes`` that cli.main prints on stderr (one line; on an error,
    at the end of the error's line, so that an error stays one line)."""

    def __init__(self, option_strings, dest, new_flag="", **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        note = f"{option_string} is deprecated and goes in the next release: use {self.new_flag}"
        namespace.deprecation_notes = [*getattr(namespace, "deprecation_notes", []), note]
        setattr(namespace, self.dest, values)


def add_deprecated_alias(p, old: str, new: str) -> None:
    """``old`` as a hidden alias of the option ``new`` already on ``p`` (same value type and dest)."""
    action = next(a for a in p._actions if new in a.option_strings)
    p.add_argument(old, dest=action.dest, type=action.type, choices=action.choices, metavar=action.metavar,
                   default=argparse.SUPPRESS, action=DeprecatedAlias, new_flag=new, help=argparse.SUPPRESS)
