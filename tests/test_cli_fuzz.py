"""Property: whatever text a user types for a numeric flag, the CLI answers with a result (exit 0)
or one line naming the flag (exit 2); never a traceback."""

import contextlib
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.cli import main

FLAGS = ["--tokens", "--batch", "--context", "--compute-efficiency", "--memory-efficiency", "--launch-overhead", "--overlap"]
texty = st.one_of(
    st.text(max_size=12),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
)


@given(st.sampled_from(FLAGS), texty)
@settings(max_examples=250, deadline=None)
def test_numeric_flags_never_crash(flag, value):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["layer", "--json", "--phase", "decode" if flag == "--context" else "prefill", flag, value])
    assert code in (0, 2)
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("roofline: error:")
        # the flag, or the quantity it sets ("batch x tokens = ... is too large"), is named
        assert flag in lines[0] or flag.lstrip("-").split("-")[0] in lines[0]
