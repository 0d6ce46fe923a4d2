"""The CLI's number type: a flag's text parsed and bounded, its error naming the flag (cli.args re-exports it; the
count lists of cli.count_lists build on it)."""

from __future__ import annotations

import argparse

from roofline.errors import RooflineError


def number_arg(flag, *, minimum=0.0, strictly=True, maximum=None, integer=False, parser=None, seconds=False):
    """An argparse type: the text parsed (parse_number, or ``parser``) and bounded. ``seconds``: a
    time, whose bound and value an error gives with their units ('at most 1 s, got 2 s')."""
    def convert(text):
        from roofline.errors import check_number
        from roofline.units import format_typed_ms, parse_number

        try:
            value = (parser or parse_number)(text, flag)
            if integer and isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
                value = int(value)  # so that a message echoes -5, not -5.0
            if seconds and isinstance(value, float) and value == value:  # a time's bounds with their units

                def typed(x):  # as a user types a time: 0, -1 us, -1 ms, 500 ms, 2 s
                    if x != 0 and abs(x) < 1e-3:
                        return f"{x * 1e6:g} us"
                    return "0" if x == 0 else ("-" + format_typed_ms(-x)) if x < 0 else format_typed_ms(x)

                if maximum is not None and value > maximum:
                    raise RooflineError(f"must be at most {typed(maximum)}, got {typed(value)}")
                if minimum is not None and (value < minimum or (strictly and value <= minimum)):
                    raise RooflineError(f"must be {'greater than' if strictly else 'at least'} {typed(minimum)}, "
                                        f"got {typed(value)}")
            check_number("value", value, minimum=minimum, strictly=strictly, maximum=maximum, integer=integer)
        except RooflineError as exc:  # argparse prefixes "argument --flag: "
            raise argparse.ArgumentTypeError(str(exc).removeprefix("value ").removeprefix(f"{flag}: ").removeprefix(f"{flag} ")) from None
        return int(value) if integer else value

    convert.__name__ = flag
    return convert
