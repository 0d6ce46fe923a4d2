"""How far measured kernels sit from their roofline, per family, GPU and engine: the efficiency the
plate's single e_c and e_m stand in for (docs/measured-kernels.md's table).

For each GPU with tables and each engine, the atlas (roofline.measured.atlas) of a few models at
prefills of 512, 2,048 and 8,192 tokens and decode batches of 1, 8, 64 and 256 at 4,096 tokens, each
model in the precision `roofline decode` gives it (as stored, else the GPU's dtype); the median of
roofline / measured kernel time over every measured op of each family and phase. Ops a table
lacks are left out (counted), rows faster than their roofline taken at it.

    python benchmarks/measured_efficiency.py [ENGINE ...]     # default: trtllm vllm sglang

With ROOFLINE_BENCH_SMOKE=1 (benchmarks/smoke.py): one GPU, one model, trtllm.
"""

import sys

import numpy as np

from smoke import announce, smoke_or  # benchmarks/ is on sys.path when run as a script

from roofline.errors import RooflineError
from roofline.measured.atlas import atlas

GPUS = smoke_or(("h100-sxm", "h200", "b200", "a100-80gb", "l40s"), ("h100-sxm",))
MODELS = smoke_or(("llama3-8b", "llama3-70b", "qwen3-32b", "mixtral-8x7b", "gpt-oss-120b"), ("llama3-8b",))
COLUMNS = (("gemm", "prefill"), ("gemm", "decode"), ("attention", "prefill"), ("attention", "decode"),
           ("moe", "prefill"), ("moe", "decode"), ("all-reduce", "decode"))


def main(argv=None) -> int:
    announce()
    engines = (argv if argv else sys.argv[1:]) or smoke_or(["trtllm", "vllm", "sglang"], ["trtllm"])
    print(f"median share of the roofline reached by measured kernels ({', '.join(MODELS)}; ops left out counted)")
    head = ["GPU", "engine", *(f"{f} {p}" for f, p in COLUMNS), "ops", "left out"]
    print(" | ".join(head))
    for gpu in GPUS:
        for engine in engines:
            shares: dict = {}
            n = left = 0
            for model in MODELS:
                try:
                    a = atlas(model, gpu, engine)
                except RooflineError as exc:
                    left += 1
                    print(f"  ({gpu} {engine} {model}: {exc})", file=sys.stderr)
                    continue
                for p in a.points:
                    shares.setdefault((p.family, p.phase), []).append(p.roofline_s / p.kernel_s)
                n += len(a.points)
                left += len(a.left_out)
            cells = [f"{np.median(shares[c]):.0%}" if c in shares else "-" for c in COLUMNS]
            print(" | ".join([gpu, engine, *cells, str(n), str(left)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
