#!/usr/bin/env python3
"""Alignment error rate of word alignments against a reference (Och and Ney, 2003), both files in
Pharaoh format (one line per sentence pair, "i-j" per link):

  python3 launch/aer.py HYPOTHESIS.align REFERENCE.align [--reverse]

The reference's links are all sure (S = P, as for eflomal's or fast_align's output), so
AER = 1 - 2 |A & R| / (|A| + |R|). Prints one JSON line: aer, precision |A & R| / |A|, recall
|A & R| / |R|, and the link counts. --reverse reads the hypothesis as j-i (target-source). A line
count mismatch is an error (exit 2).
"""
import argparse
import json
import sys


def links(line, reverse=False):
    out = set()
    for field in line.split():
        i, j = field.split("-")
        out.add((int(j), int(i)) if reverse else (int(i), int(j)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hypothesis")
    parser.add_argument("reference")
    parser.add_argument("--reverse", action="store_true")
    args = parser.parse_args()
    with open(args.hypothesis, encoding="utf-8") as f:
        hyp = [line.rstrip("\n") for line in f]
    with open(args.reference, encoding="utf-8") as f:
        ref = [line.rstrip("\n") for line in f]
    if len(hyp) != len(ref):
        print(f"aer.py: {args.hypothesis} has {len(hyp)} lines but {args.reference} has "
              f"{len(ref)}", file=sys.stderr)
        sys.exit(2)
    both = found = wanted = 0
    for h, r in zip(hyp, ref):
        a, s = links(h, args.reverse), links(r)
        both += len(a & s)
        found += len(a)
        wanted += len(s)
    print(json.dumps({"aer": 1 - 2 * both / max(1, found + wanted),
                      "precision": both / max(1, found), "recall": both / max(1, wanted),
                      "links": found, "reference_links": wanted, "lines": len(hyp)}))


if __name__ == "__main__":
    main()
