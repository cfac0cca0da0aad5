#!/usr/bin/env python3
"""Totals a Chrome trace written by `tandem-bench --profile FILE` (LibTorch's Kineto profiler).

    launch/profile-summary.py TRACE.json [TOP]

Prints how busy the GPU was over the traced steps (kernel time over the span from the first to the
last GPU activity), GPU time by kind of kernel (matrix products, attention, the rest), the TOP
kernels by total time, and the CUDA runtime calls the host made that wait for the device
(synchronisations, device-to-host copies), which are the host syncs of a step.
"""
import collections
import json
import sys

KINDS = [  # first match wins; names as cuBLAS, cuDNN and LibTorch's kernels spell them
    ("attention", ("flash", "fmha", "attention", "sdpa", "efficient")),
    ("matmul", ("gemm", "xmma", "nvjet", "cutlass", "sm90_", "sm80_", "cublas")),
    ("softmax/loss", ("softmax", "nll", "cross_entropy", "logsumexp")),
    ("norm", ("layer_norm", "layernorm")),
    ("optimizer", ("foreach", "fused_adam", "multi_tensor", "adam", "lerp")),
    ("reduce", ("reduce", "norm_kernel", "sum")),
    ("copy/cast", ("copy", "cast", "to_copy")),
    ("elementwise", ("elementwise", "vectorized", "unrolled")),
]
WAITS = ("Synchronize", "cudaMemcpy", "EventSynchronize", "StreamWaitEvent", "cudaFree")


def kind_of(name):
    lower = name.lower()
    for kind, needles in KINDS:
        if any(n in lower for n in needles):
            return kind
    return "other"


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        sys.exit(2)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    with open(sys.argv[1]) as f:
        events = json.load(f)["traceEvents"]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e]
    if not gpu:
        print("no GPU activity in the trace (a CPU run, or a profiler without CUDA)")
        return
    start = min(e["ts"] for e in gpu)
    end = max(e["ts"] + e["dur"] for e in gpu)
    busy = sum(e["dur"] for e in gpu)
    print(f"GPU span {(end - start) / 1e3:.1f} ms, busy {busy / 1e3:.1f} ms "
          f"({100 * busy / (end - start):.1f}%), {len(gpu)} kernels/copies")
    by_kind = collections.Counter()
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in gpu:
        name = e["name"] if e.get("cat") == "kernel" else e["cat"] + ": " + e["name"]
        by_kind[kind_of(name) if e.get("cat") == "kernel" else "memcpy/memset"] += e["dur"]
        by_name[name][0] += e["dur"]
        by_name[name][1] += 1
    print("GPU time by kind:")
    for kind, us in by_kind.most_common():
        print(f"  {kind:14s} {us / 1e3:9.2f} ms  {100 * us / busy:5.1f}%")
    print(f"top {top} kernels:")
    for name, (us, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {us / 1e3:8.2f} ms {count:6d}x  {name[:110]}")
    runtime = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.get("cat") == "cuda_runtime" and "dur" in e:
            runtime[e["name"]][0] += e["dur"]
            runtime[e["name"]][1] += 1
    print("CUDA runtime calls (host side):")
    for name, (us, count) in sorted(runtime.items(), key=lambda kv: -kv[1][0])[:12]:
        mark = "  <- waits for the device" if any(w in name for w in WAITS) else ""
        print(f"  {us / 1e3:8.2f} ms {count:6d}x  {name}{mark}")


if __name__ == "__main__":
    main()
