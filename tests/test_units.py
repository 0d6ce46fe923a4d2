import pytest

from roofline.errors import RooflineError
from roofline.units import GIB, format_bytes, format_time, parse_number, parse_time_s


@pytest.mark.parametrize("text,seconds", [("3us", 3e-6), ("3 µs", 3e-6), ("0.5ms", 5e-4), ("2e-6", 2e-6), ("1s", 1.0), ("40ns", 4e-8)])
def test_parse_time(text, seconds):
    assert parse_time_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text,value", [("989T", 989e12), ("3.35e12", 3.35e12), ("80G", 80e9), ("64 Gi", 64 * GIB), ("8k", 8000)])
def test_parse_number(text, value):
    assert parse_number(text) == pytest.approx(value)


def test_parse_number_with_unit():
    assert parse_number("3.35 TB/s", unit="B/s") == pytest.approx(3.35e12)


@pytest.mark.parametrize("text", ["", "abc", "3 parsecs", "1..2", "nan"])
def test_parse_rejects(text):
    with pytest.raises(RooflineError):
        parse_number(text, "x")
    with pytest.raises(RooflineError):
        parse_time_s(text, "x")


def test_format():
    assert format_time(8.756e-3) == "8.76 ms"
    assert format_time(20.6 * 86400) == "20.6 days"
    assert format_bytes(2**30) == "1.00 GiB"


@pytest.mark.parametrize("n, article", [
    (8192, "an"),   # "eight thousand one hundred ninety-two"
    (1024, "a"),    # "one thousand twenty-four"
    (11, "an"), (18, "an"), (8, "an"), (80, "an"), (86, "an"), (800, "an"), (11_000, "an"), (18_432, "an"),
    (100, "a"), (1, "a"), (81_920, "an"), (1800, "a"),  # "one thousand eight hundred"
    (4096, "a"), (128, "a"), (8.5, "an"), (0.8, "a"),   # only the whole part is read first
])
def test_indefinite_article_follows_the_spoken_number(n, article):
    from roofline.units import indefinite_article

    assert indefinite_article(n) == article


def test_a_time_can_take_another_times_unit():
    """A before and an after read alike: 9.32e-3 s in the unit of 18.6e-3 s (ms) is '9.32 ms', not
    the plate's whole microseconds '9,320 µs'; alone it keeps its own unit."""
    from roofline.units import format_duration

    assert format_duration(0.00932, unit_of=0.0186) == "9.32 ms"
    assert format_duration(0.00932) == "9,320 µs"
    assert format_duration(2.5e-5, unit_of=float("nan")) == "25 µs"


def test_a_bound_is_written_as_a_reader_writes_it():
    """Whole numbers in full with separators where %g would round them (2^32 - 1 = 4,294,967,295,
    not 4.29497e+09), round powers of ten as %g (1e+12); an array's bad value named with its place."""
    import numpy as np

    from roofline.errors import RooflineError, _bound, check_number

    assert _bound(2**32 - 1) == "4,294,967,295" and _bound(1e12) == "1e+12" and _bound(16_777_216) == "16,777,216"
    assert _bound(0.001) == "0.001"
    with pytest.raises(RooflineError, match=r"got 1e\+12 \(value 2 of 2\)"):
        check_number("context", np.array([1024.0, 1e12]), maximum=2**24)
    with pytest.raises(RooflineError, match="got 4,294,967,296"):
        check_number("seed", 2**32, maximum=2**32 - 1)


def test_a_time_of_any_finite_size_formats():
    """The largest double (1.7976931348623157e308 s) rounds to 1.8e308 at three figures, past the
    largest double: the unit is still found (it raised StopIteration). A time past a million billion
    days is written with an exponent: 1e300 s / 86,400 s a day = 1.157e295 days."""
    import sys

    from roofline.units import format_duration, format_number, time_unit

    assert time_unit(sys.float_info.max) == ("days", 86400.0)
    assert format_duration(1e300) == "1.16e+295 days"
    assert format_number(2.5e15) == "2.5e+15"
    assert format_number(999_999_999_999_999) == "999,999,999,999,999"  # just under the exponent's start


@pytest.mark.parametrize("value, echoed", [
    ("1.7950000000000001e+308s", "1.795e+308 s"), ("1e300s", "1e+300 s"), ("100s", "100 s"), ("2s", "2 s")])
def test_an_absurd_time_flag_is_refused_by_its_bound_and_echoed_as_typed(capsys, value, echoed):
    """--launch-overhead is at most 1 s: an absurd value gets that message, in seconds as it was typed
    (it was a StopIteration traceback at 1.795e308 s and a 300-digit 'days' figure at 1e300 s)."""
    from roofline.cli import main

    code = main(["layer", f"--launch-overhead={value}"])
    err = capsys.readouterr().err
    assert code == 2 and f"--launch-overhead: must be at most 1 s, got {echoed}" in err, err
