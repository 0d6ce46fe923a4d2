"""The full adversarial run: >= 10,000 fuzzed command lines (every command, every flag,
hostile values and files; tests/fuzz_harness.py) and >= 10,000 API requests (schemathesis from the
server's own OpenAPI schema, all checks on, plus hostile query values on every endpoint), in-process.
Prints the counts: cases run, contract broken (tracebacks, exit codes other than 0/2, warnings,
errors that are not one line naming an input, NaN/inf printed, 5xx, non-conforming responses).

    python3 benchmarks/fuzz.py [--cli 10000] [--api 10000] [--seed 0]

The test suite runs a bounded sample of the same (tests/test_cli_fuzz.py, tests/test_web_fuzz.py).

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): 20 command lines and 20 API requests by
default; a broken contract still fails the run (exit 1), as in a full run.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from smoke import announce, smoke_or  # noqa: E402  (benchmarks/ is on sys.path as a script)


def fuzz_cli(n: int, seed: int) -> tuple[int, list[tuple[list[str], str]]]:
    from hypothesis import HealthCheck, given, seed as hseed, settings

    import fuzz_harness as fh

    folder = Path(tempfile.mkdtemp(prefix="roofline-fuzz-"))
    files, outs = fh.hostile_files(folder / "in"), fh.outputs(folder)
    failures, count = [], [0]
    cwd = os.getcwd()
    os.chdir(folder)  # default outputs (calibrate's roofline-cpu.toml) land here

    @hseed(seed)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(fh.command_lines(files, outs))
    def prop(argv):
        count[0] += 1
        why = fh.run_case(argv)
        if why:
            failures.append((argv, why))
        if count[0] % 1000 == 0:
            print(f"  cli: {count[0]:,} cases, {len(failures)} broke the contract", file=sys.stderr, flush=True)

    try:
        with fh.stop_before_measuring():
            prop()
    finally:
        os.chdir(cwd)
    return count[0], failures


def fuzz_api(n: int, seed: int) -> tuple[int, list[str]]:
    import fuzz_api_harness as fa

    stats = {}
    sent, failures = fa.run(n, seed, lambda k, bad: print(f"  api: {k:,} requests, {bad} broke the contract",
                                                          file=sys.stderr, flush=True), stats)
    print(f"  ({stats.get('refused_in_combination', 0)} schema-valid requests were refused (422) for their "
          f"combination of sizes, which OpenAPI cannot state)")
    return sent, failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", type=int, default=smoke_or(10_000, 20), help="command lines to run (0: none)")
    ap.add_argument("--api", type=int, default=smoke_or(10_000, 20), help="API requests to send (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=3, help="examples to print per kind of failure")
    args = ap.parse_args(argv)
    announce()
    ok = True
    if args.cli:
        t0 = time.perf_counter()
        n, failures = fuzz_cli(args.cli, args.seed)
        kinds = collections.defaultdict(list)
        for cmd, why in failures:
            kinds[why.splitlines()[0][:120]].append(cmd)
        print(f"CLI: {n:,} command lines in {time.perf_counter() - t0:,.0f} s: {len(failures)} broke the contract")
        for why, cmds in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(cmds)} x {why}")
            for c in cmds[: args.show]:
                print(f"      roofline {' '.join(repr(x) if (not x or ' ' in x) else x for x in c)}")
        ok &= not failures
    if args.api:
        t0 = time.perf_counter()
        n, failures = fuzz_api(args.api, args.seed)
        print(f"API: {n:,} requests in {time.perf_counter() - t0:,.0f} s: {len(failures)} broke the contract")
        for why in failures[: 10]:
            print(f"  {why[:300]}")
        ok &= not failures
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
