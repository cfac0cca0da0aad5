#!/usr/bin/env python3
"""Translates a file with a CTranslate2 model folder that tandem-export wrote, timing the decoding
alone: what the export test (tests/e2e/export_test.cpp) and tandem-bench-decode --ctranslate2 run.

  PYTHONPATH=$(launch/ctranslate2.sh) python3 launch/ctranslate2-decode.py MODEL_DIR INPUT OUTPUT \\
      [--beam 4] [--lenpen 0.6] [--min-len N] [--max-len 256] [--compute-type default] \\
      [--threads 1] [--batch-tokens 2048] [--repeat 1] [--warmup 0] [--pieces] [--device cpu] \\
      [--source-prefix eng_Latn --target-prefix spa_Latn]

INPUT has one sentence per line: raw text, tokenized with the folder's sentencepiece.model, or with
--pieces SentencePiece pieces separated by spaces (as the benchmark hands them over). OUTPUT gets
one translation per line: detokenized, or with --pieces the pieces. --threads: batches translated
at once, one thread each (CTranslate2's inter_threads, intra_threads 1), as tandem-decode's
--threads. --min-len sets min_decoding_length; without it CTranslate2's own default holds (1, as
tandem-decode's --min-len). Prints one JSON line: wall_s, user_s and sys_s of the run with the
median wall time (of --repeat runs of translate_batch alone, without loading or tokenizing; the
upper one of an even count), every run's wall time, sentences and target pieces. A model whose
vocabulary has language tags (">>es<<", a multilingual model) gets a line's leading tag as a piece
of its own, as Tandem and MarianTokenizer tokenize it, not SentencePiece's "▁", ">>es<<". A model
with language codes (an imported NLLB-200 or M2M-100) is given --source-prefix, its source
language's code, before each source, and --target-prefix, the target's, as translate_batch's
target_prefix; the code is left out of the output. A folder of a paired vocabulary (source.spm and
target.spm) tokenizes with the one and detokenizes with the other, as Tandem does. With
--alignments each line is followed by a tab and its word alignment from translate_batch's
return_attention (the export's alignment_layer and alignment_heads), made as tandem-decode
--alignments makes it: each target piece linked to its most attended source piece, pieces merged to
the words between white space (a tag, code, EOS or piece of no word gives no link).
"""
import argparse
import json
import os
import resource
import time

import ctranslate2


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--lenpen", type=float, default=0.6)
    parser.add_argument("--min-len", type=int, default=None,
                        help="min_decoding_length; unset: CTranslate2's default (1, as tandem-decode)")
    parser.add_argument("--max-len", type=int, default=256,
                        help="max_decoding_length; at most the model's max_positions")
    parser.add_argument("--max-input-len", type=int, default=1024,
                        help="max_input_length (source tokens with EOS); at most max_positions")
    parser.add_argument("--compute-type", default="default")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-tokens", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0,
                        help="translate the first N sentences once, untimed, before the timed runs "
                             "(a fresh process's first batches pay for its allocations)")
    parser.add_argument("--pieces", action="store_true")
    parser.add_argument("--use-vmap", action="store_true",
                        help="restrict the output to the folder's vmap.txt (tandem-export --shortlist)")
    parser.add_argument("--source-prefix", default=None,
                        help="a token before each source (a language code)")
    parser.add_argument("--target-prefix", default=None,
                        help="the token each translation starts with (target_prefix)")
    parser.add_argument("--alignments", action="store_true",
                        help="after each translation a tab and its word alignment (Pharaoh i-j), "
                             "from return_attention as tandem-decode --alignments makes it")
    return parser.parse_args()


def detokenize(sp, pieces):
    """Tandem's detokenization of a paired vocabulary's pieces (data/vocab/vocab.cpp): the target model's
    own, with any "▁" left a space and the ends trimmed."""
    return sp.decode_pieces(pieces).replace("\u2581", " ").strip()


def is_tag(piece):
    return len(piece) >= 5 and piece.startswith(">>") and piece.endswith("<<")


def tokenize(sp, line, tagged):
    """Tandem's tokenization of a source line (data/vocab/vocab.cpp): with a tagged vocabulary, a span
    from ">>" to the last "<<" is a piece of its own at the line's start and dropped elsewhere."""
    start, close = line.find(">>"), line.rfind("<<")
    if not tagged or start < 0 or close < start + 3:
        return sp.encode(line, out_type=str)
    tag = [line[:close + 2]] if start == 0 else []
    return tag + sp.encode(line[:start] + line[close + 2:], out_type=str)


def word_spans(line):
    """The character ranges of the line's words, as Python's str.split() cuts them."""
    spans, start = [], None
    for at, char in enumerate(line + " "):
        if char.isspace():
            if start is not None:
                spans.append((start, at))
                start = None
        elif start is None:
            start = at
    return spans


def source_words(sp, line, pieces):
    """Per source piece the word of `line` it comes from (-1: a tag or code, or none), as
    tandem-prep and tandem-decode count them: the word holding the piece's first character outside
    white space; a lone "▁" takes the next piece's word. `pieces` are read_sources' (a leading tag or code
    first), the line's own SentencePiece pieces after them."""
    spans = word_spans(line)
    encoded = sp.encode(line, out_type="immutable_proto").pieces  # offsets in characters
    lead = len(pieces) - len(encoded)
    words = []
    for piece in encoded:
        begin = piece.begin
        while begin < piece.end and line[begin].isspace():
            begin += 1
        found = [k for k, (b, e) in enumerate(spans) if b <= begin < e] if begin < piece.end else []
        words.append(found[0] if found else None)
    for k in range(len(words) - 1, -1, -1):  # a piece of no word's byte opens the next one's
        if words[k] is None:
            words[k] = words[k + 1] if k + 1 < len(words) else -1
    return [-1] * lead + words


def target_words(decode, pieces):
    """Per target piece the word of the detokenized text it falls in (-1: before any): the last word
    of the text its prefix decodes to."""
    return [len(decode(pieces[:j + 1]).split()) - 1 for j in range(len(pieces))]


def pharaoh(src_words, tgt_words, attended):
    links = sorted({(src_words[a], t) for a, t in zip(attended, tgt_words)
                    if t >= 0 and 0 <= a < len(src_words) and src_words[a] >= 0})
    return " ".join("%d-%d" % link for link in links)


def read_sources(args, sp, lines):
    if args.pieces:
        return [line.split() for line in lines]
    prefix = [args.source_prefix] if args.source_prefix else []
    if prefix:  # a model with language codes takes no tags
        return [prefix + sp.encode(line, out_type=str) for line in lines]
    tagged = any(is_tag(sp.id_to_piece(i)) for i in range(sp.get_piece_size()))
    return [tokenize(sp, line, tagged) for line in lines]


def main():
    args = arguments()
    sp, paired = None, False
    if not args.pieces:
        import sentencepiece

        paired = os.path.exists(os.path.join(args.model_dir, "source.spm"))
        sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(
            args.model_dir, "source.spm" if paired else "sentencepiece.model"))
        target_sp = sentencepiece.SentencePieceProcessor(model_file=os.path.join(
            args.model_dir, "target.spm")) if paired else sp
    with open(args.input, encoding="utf-8") as f:
        lines = [line.rstrip("\r\n") for line in f]
    sources = read_sources(args, sp, lines)
    translator = ctranslate2.Translator(args.model_dir, device=args.device,
                                        compute_type=args.compute_type,
                                        inter_threads=args.threads, intra_threads=1)
    with open(os.path.join(args.model_dir, "tandem.json"), encoding="utf-8") as f:
        info = json.load(f)
    # A model trained with train.alignment.shift aligns each piece at the step that reads it: the
    # next step's attention, the end token's for the last piece.
    shift = 1 if args.alignments and info.get("alignment_shift", False) else 0

    def translate(batch):
        options = {} if args.min_len is None else {"min_decoding_length": args.min_len}
        if shift:
            options["return_end_token"] = True
        if args.target_prefix:
            options["target_prefix"] = [[args.target_prefix]] * len(batch)
        return translator.translate_batch(
            batch, beam_size=args.beam, length_penalty=args.lenpen,
            max_decoding_length=args.max_len, max_input_length=args.max_input_len,
            max_batch_size=args.batch_tokens, batch_type="tokens", use_vmap=args.use_vmap,
            return_attention=args.alignments, **options)

    if args.warmup > 0:
        translate(sources[:args.warmup])
    runs = []  # (wall, user, sys) seconds
    for _ in range(args.repeat):
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        results = translate(sources)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        runs.append((wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
    skip = 1 if args.target_prefix else 0  # the code translate_batch puts first
    hypotheses = [result.hypotheses[0][skip:] for result in results]
    if shift:  # the end token came for its attention row alone
        with open(os.path.join(args.model_dir, "config.json"), encoding="utf-8") as f:
            eos = json.load(f)["eos_token"]
        hypotheses = [pieces[:-1] if pieces and pieces[-1] == eos else pieces
                      for pieces in hypotheses]
    # A model with language codes: the codes (and its other specials) are no text.
    special = set(info.get("special_pieces", []))
    def decode(pieces):
        pieces = [piece for piece in pieces if piece not in special]
        return " ".join(pieces) if args.pieces else detokenize(target_sp, pieces) if paired \
            else sp.decode(pieces)

    with open(args.output, "w", encoding="utf-8") as f:
        for i, pieces in enumerate(hypotheses):
            text = decode(pieces)
            if args.alignments:  # each target piece to its most attended source piece
                attention = results[i].attention[0][skip + shift:skip + shift + len(pieces)]
                attended = [max(range(len(row)), key=row.__getitem__) for row in attention]
                attended += [-1] * (len(pieces) - len(attended))  # cut at the length limit
                words = [-1 if piece in special else w
                         for piece, w in zip(pieces, target_words(decode, pieces))]
                text += "\t" + pharaoh(source_words(sp, lines[i], sources[i]), words, attended)
            f.write(text + "\n")
    hypotheses = [[piece for piece in pieces if piece not in special] for pieces in hypotheses]
    # The upper median, as tandem-bench-decode takes its own rows'.
    wall, user, system = sorted(runs)[len(runs) // 2]
    print(json.dumps({"wall_s": wall, "user_s": user, "sys_s": system,
                      "runs_s": [run[0] for run in runs], "sentences": len(sources),
                      "tokens": sum(len(pieces) for pieces in hypotheses),
                      "compute_type": translator.compute_type}))


if __name__ == "__main__":
    main()
