#!/usr/bin/env python3
"""Totals a Chrome trace written by `tandem-bench --profile FILE` (LibTorch's Kineto profiler).

    launch/profile-summary.py TRACE.json [TOP]

Prints how busy the GPU was over the traced steps (kernel time over the span from the first to the
last GPU activity), GPU time by kind of kernel (matrix products, attention, the rest), the TOP
kernels by total time, the LibTorch operators whose launches took the most GPU time (the innermost
operator around each launch, with its caller), the CUDA runtime calls the host made that wait for the device
(synchronisations, device-to-host copies), which are the host syncs of a step, and where the GPU's
idle time went: waiting for the host to launch the next kernel (the host is the bottleneck there,
which CUDA graphs or fewer launches would remove) or waiting with work already queued.
"""
import bisect
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


def runtime_calls(events):
    """The host's CUDA runtime calls (launches, copies, memsets) by correlation id, the id that
    the GPU activity each one started carries too."""
    return {e["args"]["correlation"]: e for e in events
            if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}


def gpu_time_by_operator(events, gpu):
    """Kernel time per launching operator. A kernel's "External id" names the operator that
    launched it (else its correlation id names the runtime launch, and the innermost operator
    around that launch on its thread does); the operator around that one names the caller."""
    ops = collections.defaultdict(list)  # tid -> [(ts, end, name)] sorted by start
    by_external_id, launches = {}, runtime_calls(events)
    for e in events:
        args = e.get("args", {})
        if e.get("cat") == "cpu_op" and "dur" in e:
            ops[e.get("tid")].append((e["ts"], e["ts"] + e["dur"], e["name"]))
            if "External id" in args:
                by_external_id[args["External id"]] = e
    starts = {}
    for tid, spans in ops.items():
        spans.sort()
        starts[tid] = [s[0] for s in spans]

    def around(tid, ts, inner_end=None, count=2):
        """Names of the operators on `tid` that contain time ts, innermost first."""
        spans = ops.get(tid, [])
        i = bisect.bisect_right(starts.get(tid, []), ts) - 1
        names = []
        while i >= 0 and len(names) < count:
            if spans[i][1] >= (inner_end if inner_end is not None else ts):
                names.append(spans[i][2])
            i -= 1
        return names

    totals = collections.defaultdict(lambda: [0.0, 0])
    for k in gpu:
        args = k.get("args", {})
        op = by_external_id.get(args.get("External id"))
        if op is not None:
            callers = around(op.get("tid"), op["ts"], op["ts"] + op["dur"], count=3)
            names = [op["name"]] + [n for n in callers if n != op["name"]][:1]
        else:
            launch = launches.get(args.get("correlation"))
            names = around(launch.get("tid"), launch["ts"]) if launch is not None else []
        label = " < ".join(names) if names else "(no launching operator)"
        totals[label][0] += k["dur"]
        totals[label][1] += 1
    return totals


def idle_time(events, gpu):
    """The GPU's idle gaps (no activity on any stream), split by what ended each: an activity whose
    launch call returned only after the gap began found the GPU waiting for the host; any other
    was queued already. Returns (µs waiting for the host, µs other, such launches, launches
    matched to their runtime call)."""
    returned = {c: e["ts"] + e["dur"] for c, e in runtime_calls(events).items() if "dur" in e}
    ordered = sorted(gpu, key=lambda e: e["ts"])
    host, other, starved, found = 0.0, 0.0, 0, 0
    end = ordered[0]["ts"] + ordered[0]["dur"]
    for e in ordered[1:]:
        launch = returned.get(e.get("args", {}).get("correlation"))
        found += launch is not None
        gap = e["ts"] - end
        if gap > 0 and launch is not None and launch > end:
            host += gap
            starved += 1
        elif gap > 0:
            other += gap
        end = max(end, e["ts"] + e["dur"])
    return host, other, starved, found


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
    print(f"top {top} operators by the GPU time of the kernels they launched (operator < caller):")
    for name, (us, count) in sorted(gpu_time_by_operator(events, gpu).items(),
                                    key=lambda kv: -kv[1][0])[:top]:
        print(f"  {us / 1e3:8.2f} ms {count:6d}x  {name[:110]}")
    runtime = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.get("cat") == "cuda_runtime" and "dur" in e:
            runtime[e["name"]][0] += e["dur"]
            runtime[e["name"]][1] += 1
    host, other, starved, found = idle_time(events, gpu)
    print(f"GPU idle {(host + other) / 1e3:.2f} ms: {host / 1e3:.2f} ms waiting for the host to "
          f"launch ({starved} of {found} launches found the GPU idle), {other / 1e3:.2f} ms with "
          "work queued (the profiler slows the host: the first is an upper bound)")
    print("CUDA runtime calls (host side):")
    for name, (us, count) in sorted(runtime.items(), key=lambda kv: -kv[1][0])[:12]:
        mark = "  <- waits for the device" if any(w in name for w in WAITS) else ""
        print(f"  {us / 1e3:8.2f} ms {count:6d}x  {name}{mark}")


if __name__ == "__main__":
    main()
