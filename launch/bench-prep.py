#!/usr/bin/env python3
"""Data-scale benchmark, corpus preparation: tandem-prep on a synthetic corpus of a given size.

Generates the corpus with data/prepare/synthetic.py (on the Bible's train split when
work/bible/train.{en,es} exist, as in the quickstart; else on its generated language pair),
unless it is already there, then runs tandem-prep on it once per --threads value and prints, per
run: wall seconds, pairs/s, peak RSS (the kernel's maximum resident set of tandem-prep), and the
corpus file's size. Runs are back to back in one invocation, so their ratios are comparable.

  launch/bench-prep.py --pairs 3000000 --threads 1 2
  launch/bench-prep.py --pairs 30000000 --threads 2 --work /data/bench   # needs ~25 GB of disk

Outputs go under --work (default work/bench-prep); pass --keep to keep the corpus files.
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generate(pairs, prefix, gzip_text):
    suffix = ".gz" if gzip_text else ""
    paths = [prefix + ".src" + suffix, prefix + ".tgt" + suffix]
    if all(os.path.exists(p) for p in paths):
        return paths
    command = [sys.executable, os.path.join(ROOT, "data/prepare/synthetic.py"), "--pairs",
               str(pairs), "--out", prefix]
    bible = [os.path.join(ROOT, "work/bible/train." + lang) for lang in ("en", "es")]
    if all(os.path.exists(p) for p in bible):
        command += ["--base-src", bible[0], "--base-tgt", bible[1]]
    if gzip_text:
        command.append("--gzip")
    start = time.monotonic()
    subprocess.run(command, check=True)
    print(f"bench-prep: generated in {time.monotonic() - start:.0f} s", flush=True)
    return paths


def run_prep(binary, src, tgt, valid, out, threads, extra):
    command = [binary, "--train-src", src, "--train-tgt", tgt, "--valid-src", valid[0],
               "--valid-tgt", valid[1], "--out", out, "--threads", str(threads)] + extra
    # Peak RSS of this child alone: fork a process that runs it and reports its own children.
    probe = ("import resource, subprocess, sys, time\n"
             "t = time.monotonic(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
             "w = time.monotonic() - t\n"
             "print(r.returncode, w, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    result = subprocess.run([sys.executable, "-c", probe] + command, capture_output=True,
                            text=True, check=True)
    code, wall, rss_kb = result.stdout.split()
    if int(code) != 0:
        sys.exit(f"bench-prep: tandem-prep failed with status {code}: {' '.join(command)}")
    return float(wall), int(rss_kb) / 1024.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3000000)
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--gzip", action="store_true", help="gzip-compressed input text")
    parser.add_argument("--work", default=os.path.join(ROOT, "work/bench-prep"))
    parser.add_argument("--bin", default=os.path.join(ROOT, "build/trainer/tools/tandem-prep"))
    parser.add_argument("--keep", action="store_true", help="keep the corpus files written")
    parser.add_argument("prep_args", nargs="*", help="more tandem-prep options, after --")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    src, tgt = generate(args.pairs, os.path.join(args.work, f"train{args.pairs}"), args.gzip)
    valid = generate(2000, os.path.join(args.work, "valid"), False)
    text_mb = (os.path.getsize(src) + os.path.getsize(tgt)) / 1e6
    print(f"bench-prep: {args.pairs} pairs, {text_mb:.0f} MB of text"
          f"{' (gzip)' if args.gzip else ''}, tandem-prep {' '.join(args.prep_args)}")
    print(f"{'threads':>8} {'wall s':>9} {'pairs/s':>11} {'peak RSS MB':>12} {'corpus MB':>10}")
    for threads in args.threads:
        out = os.path.join(args.work, f"corpus{args.pairs}-t{threads}.h5")
        wall, rss_mb = run_prep(args.bin, src, tgt, valid, out, threads, args.prep_args)
        size_mb = os.path.getsize(out) / 1e6
        print(f"{threads:>8} {wall:>9.1f} {args.pairs / wall:>11.0f} {rss_mb:>12.0f} "
              f"{size_mb:>10.0f}", flush=True)
        if not args.keep:
            os.remove(out)


if __name__ == "__main__":
    main()
