#!/usr/bin/env python3
"""launch/align.sh's work: eflomal over every file pair together, both directions symmetrized.

Each OUT gets one line per line of its SRC: the links "i-j" (source word i, target word j, from 0,
over the words between white space, as str.split() gives them), sorted.
"""
import argparse
import gzip
import os
import subprocess
import sys
import tempfile

NEIGHBOURS = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def read_lines(path):
    with open(path, "rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    opener = gzip.open if gzipped else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as text:
        return [line.rstrip("\n").rstrip("\r") for line in text]


def parse(line):
    return {tuple(int(k) for k in field.split("-")) for field in line.split()}


def grow_diag_final_and(forward, reverse):
    """Koehn et al.'s symmetrization: the intersection, grown through diagonal neighbours in the
    union that align a word not yet aligned, then the links of either direction between two words
    both still unaligned."""
    union = forward | reverse
    links = forward & reverse
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}

    def add(i, j):
        links.add((i, j))
        src_done.add(i)
        tgt_done.add(j)

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in NEIGHBOURS:
                point = (i + di, j + dj)
                if point in union and point not in links and (
                        point[0] not in src_done or point[1] not in tgt_done):
                    add(*point)
                    grown = True
    for direction in (forward, reverse):
        for i, j in sorted(direction):
            if i not in src_done and j not in tgt_done:
                add(i, j)
    return links


SYMMETRIZE = {
    "grow-diag-final-and": grow_diag_final_and,
    "intersect": lambda forward, reverse: forward & reverse,
    "union": lambda forward, reverse: forward | reverse,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eflomal", required=True, help="the eflomal-align script")
    parser.add_argument("--symmetrize", choices=sorted(SYMMETRIZE), default="grow-diag-final-and")
    parser.add_argument("files", nargs="+", help="SRC TGT OUT, once per corpus")
    args = parser.parse_args()
    if len(args.files) % 3 != 0:
        parser.error("expected SRC TGT OUT triples; got %d files" % len(args.files))
    triples = [args.files[k:k + 3] for k in range(0, len(args.files), 3)]
    src, tgt, counts = [], [], []
    for src_path, tgt_path, _ in triples:
        src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
        if len(src_lines) != len(tgt_lines):
            sys.exit("align.sh: '%s' has %d lines but '%s' has %d" %
                     (src_path, len(src_lines), tgt_path, len(tgt_lines)))
        src += src_lines
        tgt += tgt_lines
        counts.append(len(src_lines))
    with tempfile.TemporaryDirectory(prefix="tandem-align-") as scratch:
        paths = {name: os.path.join(scratch, name) for name in ("src", "tgt", "fwd", "rev")}
        for name, lines in (("src", src), ("tgt", tgt)):
            with open(paths[name], "w", encoding="utf-8", newline="\n") as out:
                out.writelines(line + "\n" for line in lines)
        subprocess.run([sys.executable, args.eflomal, "--overwrite", "-s", paths["src"],
                        "-t", paths["tgt"], "-f", paths["fwd"], "-r", paths["rev"]], check=True)
        forward = [parse(line) for line in read_lines(paths["fwd"])]
        reverse = [parse(line) for line in read_lines(paths["rev"])]
    if len(forward) != len(src) or len(reverse) != len(src):
        sys.exit("align.sh: eflomal wrote %d and %d lines for %d pairs" %
                 (len(forward), len(reverse), len(src)))
    symmetrize = SYMMETRIZE[args.symmetrize]
    first = 0
    for (_, _, out_path), count in zip(triples, counts):
        partial = out_path + ".partial"
        with open(partial, "w", encoding="utf-8", newline="\n") as out:
            for k in range(first, first + count):
                links = sorted(symmetrize(forward[k], reverse[k]))
                out.write(" ".join("%d-%d" % link for link in links) + "\n")
        os.replace(partial, out_path)
        print("align.sh: %s: %d lines" % (out_path, count), file=sys.stderr)
        first += count


if __name__ == "__main__":
    main()
