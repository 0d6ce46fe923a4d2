"""The OpenAPI side of the parameter tests (test_view_parameters, test_serving_parameters): a query's schema
read back against its declaration (roofline.parameters.Param)."""

from __future__ import annotations


def schema_bounds(entry: dict):
    """(low, high, low exclusive, the schema) of an OpenAPI parameter entry (an optional one's first anyOf)."""
    sch = entry["schema"].get("anyOf", [entry["schema"]])[0]
    return sch.get("minimum", sch.get("exclusiveMinimum")), sch.get("maximum"), "exclusiveMinimum" in sch, sch


def assert_declared_range(entry: dict, p) -> None:
    """The entry's range and type are Param ``p``'s API range: a whole number above lo is lo + 1 inclusive."""
    low, high, exclusive, sch = schema_bounds(entry)
    lo, hi, strictly = p.api_range()
    assert high == hi
    if p.integer and strictly:  # a whole number above lo: the next one, inclusive
        assert (low, exclusive) == (int(lo) + 1, False)
    else:
        assert (low, exclusive) == (lo, strictly)
    assert sch["type"] == ("integer" if p.integer else "number")
