#!/usr/bin/env python3
"""A tagged test set for tandem-decode --markup, and its check against word alignments.

  python3 launch/markup-check.py make SRC HYP ALIGN TAGGED EXPECTED [--lines 300] [--seed 1]
  python3 launch/markup-check.py check TAGGED OUTPUT EXPECTED HYP

make: HYP is the plain translation of SRC (tandem-decode without --markup) and ALIGN the word
alignment of SRC to HYP (eflomal: launch/align.sh with the training text, so that it learns from
enough). For each of the first --lines lines it wraps one to three words or two-word phrases in
paired tags (some nested, with attributes, no two alike), where ALIGN links the wrapped words to
contiguous words of HYP, puts a self-closing tag before some word, writes one of the line's commas
as the entity &#44; and leaves every fifth line untagged. The text between the tags is SRC's line,
so its translation is HYP's. TAGGED gets the lines, EXPECTED (JSON lines) the target words each
paired tag should wrap.

check: OUTPUT is tandem-decode --markup's translation of TAGGED. Prints one JSON line: lines;
well_formed (every tag closed in order) and tags_intact (each of the line's tags exactly once,
byte for byte), as fractions of the tagged lines; paired_exact, the fraction of paired tags that
wrap exactly the HYP words ALIGN links to the words they wrapped; untagged_identical, the fraction
of untagged lines equal to HYP's.
"""
import argparse
import json
import random
import re
import sys

TAG = re.compile(r"<[^>]*>")


def links(line):
    out = []
    for field in line.split():
        i, j = field.split("-")
        out.append((int(i), int(j)))
    return out


def contiguous_targets(words, pairs):
    """The target words linked to source words `words`, if they are a non-empty contiguous run."""
    targets = sorted({j for i, j in pairs if i in words})
    if not targets or targets[-1] - targets[0] + 1 != len(targets):
        return None
    return targets


def make(args):
    rng = random.Random(args.seed)
    src = open(args.src, encoding="utf-8").read().splitlines()
    hyp = open(args.hyp, encoding="utf-8").read().splitlines()
    align = open(args.align, encoding="utf-8").read().splitlines()
    if not len(src) == len(hyp) == len(align):
        sys.exit("markup-check.py: SRC, HYP and ALIGN have different line counts")
    tagged, expected = [], []
    for k, (line, pairs) in enumerate(zip(src[:args.lines], align)):
        words = line.split()
        pairs = links(pairs)
        if k % 5 == 4 or len(words) < 3 or line != " ".join(words):
            tagged.append(line)
            expected.append({"tags": []})
            continue
        opens, closes, tags = {}, {}, []
        taken = set()
        for n in range(rng.randint(1, 3)):
            width = rng.choice([1, 1, 2])
            for _ in range(20):  # a span of free words aligned to contiguous target words
                start = rng.randrange(len(words) - width + 1)
                span = set(range(start, start + width))
                targets = contiguous_targets(span, pairs)
                if targets is not None and not span & taken:
                    break
            else:
                continue
            taken |= span
            name = rng.choice(["b", "i", "g", "a"])
            attribute = {"b": ' id="%d.%d"', "i": "", "g": ' id="%d-%d" ctype="x-bold"',
                         "a": ' href="/p?a=%d&amp;b=%d"'}[name]
            open_text = "<%s%s>" % (name, attribute % (k, n) if "%" in attribute else attribute)
            if any(tag["open"] == open_text for tag in tags):  # a second <i>: check tells them apart
                open_text = '<%s title="%d.%d">' % (name, k, n)
            opens.setdefault(start, []).append(open_text)
            closes.setdefault(start + width - 1, []).append("</%s>" % name)
            tags.append({"open": open_text, "targets": targets})
            # A two-word phrase: sometimes a tag inside it around one of its words.
            if width == 2 and rng.random() < 0.5:
                inner = start + rng.randrange(2)
                inner_targets = contiguous_targets({inner}, pairs)
                if inner_targets is not None:
                    inner_open = '<span class="k%d">' % n
                    if inner == start:
                        opens[start].append(inner_open)
                        closes.setdefault(start, []).insert(0, "</span>")
                    else:
                        opens.setdefault(inner, []).insert(0, inner_open)
                        closes[inner].insert(0, "</span>")
                    tags.append({"open": inner_open, "targets": inner_targets})
        out = []
        single = rng.randrange(len(words)) if rng.random() < 0.4 else -1
        for w, word in enumerate(words):
            text = ('<x id="%d"/>' % k if w == single else "") + "".join(opens.get(w, [])) + \
                word + "".join(closes.get(w, []))
            out.append(text)
        line_out = " ".join(out)
        if "," in line_out and rng.random() < 0.5:  # no attribute holds a comma
            at = line_out.index(",")
            line_out = line_out[:at] + "&#44;" + line_out[at + 1:]
        tagged.append(line_out)
        expected.append({"tags": tags})
    with open(args.tagged, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in tagged))
    with open(args.expected, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(e) + "\n" for e in expected))


def parse(line):
    """(text, tags with their word spans, well formed): each paired tag's open text and the
    indices of the text's words it wraps."""
    text, stack, spans, ok = "", [], [], True
    pos = 0
    for m in TAG.finditer(line):
        text += line[pos:m.start()]
        pos = m.end()
        tag = m.group(0)
        if tag.startswith("</"):
            if not stack or stack[-1][0].split()[0].rstrip(">")[1:] != tag[2:-1]:
                ok = False
                continue
            open_text, start = stack.pop()
            spans.append((open_text, start, len(text)))
        elif not tag.endswith("/>"):
            stack.append((tag, len(text)))
    text += line[pos:]
    ok = ok and not stack
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    wrapped = []
    for open_text, begin, end in spans:
        wrapped.append((open_text, [w for w, (b, e) in enumerate(words) if b < end and e > begin]))
    unescaped = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return unescaped, wrapped, ok


def check(args):
    tagged = open(args.tagged, encoding="utf-8").read().splitlines()
    output = open(args.output, encoding="utf-8").read().splitlines()
    expected = [json.loads(line) for line in open(args.expected, encoding="utf-8")]
    hyp = open(args.hyp, encoding="utf-8").read().splitlines()
    lines = tagged_lines = well_formed = intact = untagged = untagged_same = 0
    paired = exact = 0
    for k, (line_in, line_out, want) in enumerate(zip(tagged, output, expected)):
        lines += 1
        if not TAG.search(line_in) and "&" not in line_in:
            untagged += 1
            untagged_same += line_out == hyp[k]
            continue
        tagged_lines += 1
        _, wrapped, ok = parse(line_out)
        well_formed += ok
        intact += sorted(TAG.findall(line_in)) == sorted(TAG.findall(line_out))
        got = {open_text: words for open_text, words in wrapped}
        if len({tag["open"] for tag in want["tags"]}) != len(want["tags"]):
            sys.exit("markup-check.py: line %d of %s has two paired tags alike; check cannot tell "
                     "them apart (make a new set)" % (k + 1, args.expected))
        for tag in want["tags"]:
            paired += 1
            exact += got.get(tag["open"]) == tag["targets"]
    print(json.dumps({"lines": lines, "tagged_lines": tagged_lines,
                      "well_formed": well_formed / max(1, tagged_lines),
                      "tags_intact": intact / max(1, tagged_lines), "paired_tags": paired,
                      "paired_exact": exact / max(1, paired), "untagged_lines": untagged,
                      "untagged_identical": untagged_same / max(1, untagged)}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    for name in ("src", "hyp", "align", "tagged", "expected"):
        m.add_argument(name)
    m.add_argument("--lines", type=int, default=300)
    m.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("check")
    for name in ("tagged", "output", "expected", "hyp"):
        c.add_argument(name)
    args = parser.parse_args()
    make(args) if args.command == "make" else check(args)


if __name__ == "__main__":
    main()
