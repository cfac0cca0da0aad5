#!/usr/bin/env python3
"""Turns two SWORD `mod2imp` exports (OSIS markup) into a verse-aligned parallel corpus.

Usage: bible_clean.py SRC.imp TGT.imp OUT_DIR [--src-lang en] [--tgt-lang es]
Writes OUT_DIR/{train,valid,test}.{SRC_LANG,TGT_LANG} and prints one stats line. Standard library
only.
"""

import argparse
import hashlib
import math
import os
import re
import sys
from collections import defaultdict

# The 66 books both Protestant and Catholic Bibles hold, spelled as SWORD's KJV versification
# exports them. Deuterocanonical books (present in the WEB module only) are left out.
CANONICAL_BOOKS = frozenset("""
Genesis|Exodus|Leviticus|Numbers|Deuteronomy|Joshua|Judges|Ruth|I Samuel|II Samuel|I Kings|
II Kings|I Chronicles|II Chronicles|Ezra|Nehemiah|Esther|Job|Psalms|Proverbs|Ecclesiastes|
Song of Solomon|Isaiah|Jeremiah|Lamentations|Ezekiel|Daniel|Hosea|Joel|Amos|Obadiah|Jonah|
Micah|Nahum|Habakkuk|Zephaniah|Haggai|Zechariah|Malachi|Matthew|Mark|Luke|John|Acts|Romans|
I Corinthians|II Corinthians|Galatians|Ephesians|Philippians|Colossians|I Thessalonians|
II Thessalonians|I Timothy|II Timothy|Titus|Philemon|Hebrews|James|I Peter|II Peter|I John|
II John|III John|Jude|Revelation of John""".replace("\n", "").split("|"))

# Per mille of verses, chosen by a hash of the verse key, that go to valid and to test.
VALID_PER_MILLE = 15
TEST_PER_MILLE = 15

# Alignment checks. Both modules are exported in SWORD's KJV versification, yet in a few chapters
# the 1909 text sits one verse off (Numbers 13, Jonah 2, ...), and RV 1909 appends the KJV-style
# subscriptions ("Fué escrita á los Hebreos desde Italia") to the epistles' last verses. Verse
# lengths in characters track each other closely (the median es/en ratio is about 0.96), which
# exposes both: a chapter is dropped when shifting it by one verse fits lengths clearly better,
# a pair when one side is more than MAX_LENGTH_RATIO times the other.
MAX_LENGTH_RATIO = 2.0
SHIFT_GAIN = 0.8

KEY_RE = re.compile(r"^(?P<book>.+) (?P<chapter>\d+):(?P<verse>\d+)$")
TAG_RE = re.compile(r"<(?P<close>/?)(?P<name>[A-Za-z][\w:.-]*)(?P<attrs>[^>]*?)(?P<empty>/?)>")
LAST_WORD_RE = re.compile(r"\w+$")
ENTITY_RE = re.compile(r"&(?:#(\d+)|#[xX]([0-9A-Fa-f]+)|(amp|lt|gt|quot|apos));")
NAMED_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}

# Elements dropped with everything inside them: footnotes, editorial headings, speaker labels.
# A <title canonical="true"> (a psalm's superscription) is scripture and kept: the Spanish
# module has those words as plain verse text.
DROPPED = frozenset({"note", "title", "speaker"})
# Elements inside running text; every other tag (lines, paragraphs, milestones) separates text.
INLINE = frozenset({"w", "transChange", "q", "seg", "name", "hi", "foreign", "divineName",
                    "rdg", "catchWord", "reference", "abbr", "inscription", "mentioned"})
# Word-level markup: two <w> elements may touch ("allí</w><transChange>también"), which a
# reader sees as two words.
WORD_TAGS = frozenset({"w", "transChange"})
# RV 1909 marks a translator-added object pronoun glued to its verb ("sáca</w><transChange>lo"
# = "sácalo") the same way as an added separate word ("allí</w><transChange>también"). An
# added chunk that is one of these pronouns is glued, except after the few non-verbs that the
# 1909 text shows in that position ("no lo", "que la", "Jehová los").
ENCLITICS = frozenset({"lo", "la", "le", "los", "las", "les", "me", "te", "se", "nos", "os"})
NOT_VERBS = frozenset({"no", "como", "que", "y", "os", "ellos", "gentes", "dios", "jehová",
                       "josué", "cuánto"})
NO_SPACE_AFTER = set("([{“‘¿¡«")
NO_SPACE_BEFORE = set(".,;:!?)]}’”»…")


def read_imp(path):
    """Yields (key, raw OSIS text) for every entry of a mod2imp export."""
    key, lines = None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("$$$"):
                if key is not None:
                    yield key, "\n".join(lines)
                key, lines = line[3:], []
            else:
                lines.append(line)
    if key is not None:
        yield key, "\n".join(lines)


def decode_entities(text):
    def one(m):
        if m.group(1):
            return chr(int(m.group(1)))
        if m.group(2):
            return chr(int(m.group(2), 16))
        return NAMED_ENTITIES[m.group(3)]
    return ENTITY_RE.sub(one, text)


def is_dropped(name, attrs):
    return name in DROPPED and not (name == "title" and 'canonical="true"' in attrs)


def ends_book(name, attrs):
    return name == "div" and ('type="glossary"' in attrs or
                              ('type="book"' in attrs and "eID=" in attrs))


def join_gap(out, chunk, gap):
    """Whether a space must separate `chunk` from the text already in `out` across markup."""
    if not out or not gap or out[-1].isspace() or chunk[0].isspace():
        return False
    if gap == "word":
        if not (out[-1].isalnum() and chunk[0].isalnum()):
            return False
        return chunk not in ENCLITICS or LAST_WORD_RE.search(out).group(0).lower() in NOT_VERBS
    return out[-1] not in NO_SPACE_AFTER and chunk[0] not in NO_SPACE_BEFORE


def clean(osis):
    """Plain text of one verse: markup and footnotes gone, entities decoded, spaces normalised."""
    out = ""
    gap = None       # strongest boundary seen since the last text: None, "word" or "block"
    skip_depth = 0   # > 0 while inside a dropped element (they nest: notes hold <reference>...)
    pos = 0
    for m in TAG_RE.finditer(osis + "<end/>"):
        chunk = osis[pos:m.start()]
        pos = m.end()
        if skip_depth == 0 and chunk:
            chunk = decode_entities(chunk) if "&" in chunk else chunk
            if join_gap(out, chunk, gap):
                out += " "
            out += chunk
            gap = None
        closing, name, attrs, empty = m.groups()
        if ends_book(name, attrs):
            break  # what follows the book's last verse (WEB's glossary) is not scripture
        if skip_depth > 0:
            if not empty:
                skip_depth += -1 if closing else 1
            continue
        if not closing and not empty and is_dropped(name, attrs):
            skip_depth = 1
            gap = "block"
        elif name not in INLINE:
            gap = "block"
        elif name in WORD_TAGS and gap is None:
            gap = "word"
    return " ".join(out.split())


def verse_texts(path):
    """{(book, chapter, verse): text} for the canonical books' non-empty verses > 0."""
    texts = {}
    for key, osis in read_imp(path):
        m = KEY_RE.match(key)
        if not m or m.group("book") not in CANONICAL_BOOKS or int(m.group("verse")) == 0:
            continue
        text = clean(osis)
        if text:
            texts[(m.group("book"), int(m.group("chapter")), int(m.group("verse")))] = text
    return texts


def length_mismatch(src_len, tgt_len):
    return abs(math.log((tgt_len + 10) / (src_len + 10)))


def shifted_chapters(src, tgt):
    """(book, chapter)s whose verse lengths match better with the target one verse off."""
    chapters = defaultdict(dict)
    for key in src.keys() & tgt.keys():
        chapters[key[:2]][key[2]] = (len(src[key]), len(tgt[key]))
    shifted = set()
    for chapter, lengths in chapters.items():
        def cost(shift):
            costs = [length_mismatch(lengths[v][0], lengths[v + shift][1])
                     for v in lengths if v + shift in lengths]
            return sum(costs) / len(costs) if costs else math.inf
        if min(cost(-1), cost(1)) < SHIFT_GAIN * cost(0):
            shifted.add(chapter)
    return shifted


def aligned_keys(src, tgt):
    """Verse keys in both, in the source's order, minus misaligned ones; and what was dropped."""
    shifted = shifted_chapters(src, tgt)
    keys, dropped = [], {"shifted": 0, "length": 0}
    max_mismatch = math.log(MAX_LENGTH_RATIO)
    for key in (k for k in src if k in tgt):
        if key[:2] in shifted:
            dropped["shifted"] += 1
        elif length_mismatch(len(src[key]), len(tgt[key])) > max_mismatch:
            dropped["length"] += 1
        else:
            keys.append(key)
    return keys, dropped, shifted


def split_of(key):
    """'train', 'valid' or 'test', fixed forever by the verse key alone."""
    book, chapter, verse = key
    digest = hashlib.sha1(f"{book} {chapter}:{verse}".encode("utf-8")).hexdigest()
    bucket = int(digest[:8], 16) % 1000
    if bucket < VALID_PER_MILLE:
        return "valid"
    if bucket < VALID_PER_MILLE + TEST_PER_MILLE:
        return "test"
    return "train"


def write_atomically(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(line + "\n" for line in lines)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src_imp")
    parser.add_argument("tgt_imp")
    parser.add_argument("out_dir")
    parser.add_argument("--src-lang", default="en")
    parser.add_argument("--tgt-lang", default="es")
    args = parser.parse_args()

    src, tgt = verse_texts(args.src_imp), verse_texts(args.tgt_imp)
    order, dropped, shifted = aligned_keys(src, tgt)
    splits = {"train": ([], []), "valid": ([], []), "test": ([], [])}
    for key in order:
        src_lines, tgt_lines = splits[split_of(key)]
        src_lines.append(src[key])
        tgt_lines.append(tgt[key])

    os.makedirs(args.out_dir, exist_ok=True)
    for name, (src_lines, tgt_lines) in splits.items():
        write_atomically(os.path.join(args.out_dir, f"{name}.{args.src_lang}"), src_lines)
        write_atomically(os.path.join(args.out_dir, f"{name}.{args.tgt_lang}"), tgt_lines)

    counts = {name: len(lines[0]) for name, lines in splits.items()}
    print(f"bible: {len(order)} verse pairs {args.src_lang}-{args.tgt_lang} "
          f"(train {counts['train']}, valid {counts['valid']}, test {counts['test']}); "
          f"verses only in {args.src_lang}: {len(src.keys() - tgt.keys())}, "
          f"only in {args.tgt_lang}: {len(tgt.keys() - src.keys())}; dropped as misaligned: "
          f"{dropped['shifted']} in {len(shifted)} shifted chapters, {dropped['length']} by "
          f"length ratio; written to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
