#!/usr/bin/env python3
"""Data-scale benchmark, training start-up: how long tandem-train takes to its first step on a
corpus, and each rank's resident memory then.

Starts `tandem-train --ranks N` (the tiny preset unless --config) on --corpus with a fresh
checkpoint directory, reads its output, and at the first step's progress line reads VmRSS of every
rank from /proc; prints seconds from launch to that line and the RSS per rank, then stops the job.
Run it on two corpora in one invocation to compare them (the ratios are what to quote):

  launch/bench-train-start.py --corpus work/bible/corpus.h5 work/bench-prep/corpus3000000-t2.h5
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rank_pids(launcher_pid, binary):
    """Processes running `binary` other than the launcher: its ranks."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == launcher_pid:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.realpath(argv[0].decode()) == binary:
            pids.append(int(entry))
    return pids


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def measure(args, corpus):
    binary = os.path.realpath(args.bin)
    with tempfile.TemporaryDirectory(prefix="tandem-start-") as run_dir:
        command = [binary, "--config", args.config, "--ranks", str(args.ranks),
                   "--set", f"data.corpus={corpus}", "--set", f"checkpoint.dir={run_dir}",
                   "--set", "log.every_steps=1", "--set", "train.max_steps=1000000",
                   "--set", "checkpoint.every_steps=0", "--set", "valid.every_steps=0"]
        start = time.monotonic()
        job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first_step = None
        for line in job.stdout:
            if re.search(r"\bstep 1 \|", line):
                first_step = time.monotonic() - start
                break
        if first_step is None:
            sys.exit(f"bench-train-start: tandem-train ended before its first step: {command}")
        rss = [rss_mb(pid) for pid in rank_pids(job.pid, binary)]
        job.send_signal(signal.SIGINT)
        job.send_signal(signal.SIGINT)  # the second signal stops without a save
        job.communicate()
    return first_step, rss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", nargs="+", required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--config", default=os.path.join(ROOT, "configs/tiny.yaml"))
    parser.add_argument("--bin", default=os.path.join(ROOT, "build/trainer/tools/tandem-train"))
    args = parser.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    print(f"{'corpus':<48} {'first step s':>12} {'RSS per rank MB':>18}")
    for corpus in args.corpus:
        first_step, rss = measure(args, corpus)
        shown = " ".join(f"{r:.0f}" for r in rss)
        print(f"{corpus:<48} {first_step:>12.1f} {shown:>18}", flush=True)


if __name__ == "__main__":
    main()
