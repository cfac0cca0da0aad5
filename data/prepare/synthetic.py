#!/usr/bin/env python3
"""A large parallel corpus, deterministically, for data-scale tests and benchmarks.

Pairs are copies of a base corpus with one word changed on each side per copy, so every pair of
the output is distinct, the text looks like the base (sentence lengths, characters, vocabulary)
and the size is whatever is asked. The base is either real text (--base-src/--base-tgt, e.g. the
Bible's train split from bible.sh) or, without them, a generated language pair: Zipf-distributed
made-up words, translated word by word through a fixed dictionary with adjacent pairs swapped, so
the task is learnable. The same arguments always give byte-identical files (no dependence on the
Python version: the generator is SplitMix64).

  data/prepare/synthetic.py --pairs 3000000 --out work/big/train          # train.src, train.tgt
  data/prepare/synthetic.py --pairs 3000000 --base-src work/bible/train.en \\
      --base-tgt work/bible/train.es --gzip --out work/big/train           # *.src.gz, *.tgt.gz

Prints one line: pairs written, bytes per side, files.
"""
import argparse
import gzip
import sys

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def made_up_word(rng, syllables_min, syllables_max):
    count = syllables_min + rng.below(syllables_max - syllables_min + 1)
    return "".join(SYLLABLES[rng.below(len(SYLLABLES))] for _ in range(count))


def generated_base(seed, pairs, words):
    """`pairs` sentence pairs of a made-up language pair with a `words`-word vocabulary."""
    rng = SplitMix64(seed)
    src_words = [made_up_word(rng, 1, 4) for _ in range(words)]
    tgt_words = [made_up_word(rng, 1, 4) for _ in range(words)]
    # Zipf: word k drawn with weight 1/(k+1), through a cumulative table and bisection.
    cumulative, total = [], 0.0
    for k in range(words):
        total += 1.0 / (k + 1)
        cumulative.append(total)
    base = []
    for _ in range(pairs):
        length = 3 + rng.below(28)
        ids = []
        for _ in range(length):
            x = (rng.next() >> 11) / float(1 << 53) * total
            lo, hi = 0, words - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if cumulative[mid] < x:
                    lo = mid + 1
                else:
                    hi = mid
            ids.append(lo)
        src = [src_words[i] for i in ids]
        tgt = [tgt_words[i] for i in ids]
        for j in range(0, len(tgt) - 1, 2):  # a word-order difference to learn
            tgt[j], tgt[j + 1] = tgt[j + 1], tgt[j]
        base.append((" ".join(src).capitalize() + ".", " ".join(tgt).capitalize() + "."))
    return base


def read_base(src_path, tgt_path):
    with open(src_path, encoding="utf-8") as f:
        src = f.read().splitlines()
    with open(tgt_path, encoding="utf-8") as f:
        tgt = f.read().splitlines()
    if len(src) != len(tgt):
        sys.exit(f"synthetic.py: '{src_path}' has {len(src)} lines but '{tgt_path}' has {len(tgt)}")
    base = [(s, t) for s, t in zip(src, tgt) if s.strip() and t.strip()]
    if not base:
        sys.exit(f"synthetic.py: no non-empty pairs in '{src_path}' and '{tgt_path}'")
    return base


def altered(sentence, copy, side):
    """The sentence with one word (chosen by the copy) suffixed by the copy's number: copy 0 is
    the base sentence itself."""
    if copy == 0:
        return sentence
    words = sentence.split(" ")
    k = (copy * 7 + side) % len(words)
    words[k] = words[k] + SYLLABLES[copy % len(SYLLABLES)] + str(copy)
    return " ".join(words)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, required=True, help="sentence pairs to write")
    parser.add_argument("--out", required=True, help="output prefix: <out>.src and <out>.tgt")
    parser.add_argument("--base-src", help="base corpus, source side (default: generated)")
    parser.add_argument("--base-tgt", help="base corpus, target side")
    parser.add_argument("--base-pairs", type=int, default=30000,
                        help="pairs of the generated base (default 30000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated base")
    parser.add_argument("--gzip", action="store_true", help="write <out>.src.gz and <out>.tgt.gz")
    args = parser.parse_args()
    if args.pairs < 0 or args.base_pairs < 1:
        sys.exit("synthetic.py: --pairs must be >= 0 and --base-pairs >= 1")
    if (args.base_src is None) != (args.base_tgt is None):
        sys.exit("synthetic.py: give both --base-src and --base-tgt, or neither")

    if args.base_src:
        base = read_base(args.base_src, args.base_tgt)
    else:
        base = generated_base(args.seed, args.base_pairs, 20000)
    suffix = ".gz" if args.gzip else ""
    paths = [args.out + ".src" + suffix, args.out + ".tgt" + suffix]
    # mtime=0: gzip headers carry no time, so the files are byte-identical from run to run.
    opener = (lambda p: gzip.GzipFile(p, "wb", compresslevel=6, mtime=0)) if args.gzip else \
        (lambda p: open(p, "wb"))
    sizes = [0, 0]
    with opener(paths[0]) as src_file, opener(paths[1]) as tgt_file:
        files = (src_file, tgt_file)
        block = [[], []]
        for i in range(args.pairs):
            copy, index = divmod(i, len(base))
            for side in (0, 1):
                line = (altered(base[index][side], copy, side) + "\n").encode("utf-8")
                block[side].append(line)
                sizes[side] += len(line)
            if len(block[0]) == 65536:
                for side in (0, 1):
                    files[side].write(b"".join(block[side]))
                    block[side].clear()
        for side in (0, 1):
            files[side].write(b"".join(block[side]))
    print(f"synthetic.py: {args.pairs} pairs, {sizes[0]} + {sizes[1]} bytes of text: "
          f"{paths[0]} {paths[1]}")


if __name__ == "__main__":
    main()
