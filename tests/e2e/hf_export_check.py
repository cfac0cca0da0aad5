#!/usr/bin/env python3
"""Runs a folder written by tandem-export --to huggingface with Hugging Face transformers alone, as
a user would: what tandem-export's test compares with Tandem's own figures (tests/e2e/export_test.cpp).

  hf_export_check.py DIR SRC TGT OUT [--prefix TEXT]

Loads DIR with AutoTokenizer and AutoModelForSeq2SeqLM, and writes OUT (JSON): the log lines of
the load that speak of weights (missing, unexpected, newly initialized: there should be none);
"nll" and "tokens", the teacher-forced negative log-likelihood of every TGT line given its SRC
line, summed, and the target tokens it is over (</s> included); "greedy" and "beam", generate()'s
translations of SRC with num_beams 1 and with the folder's generation_config (beam 4); and
"pipeline", pipeline("translation", model=DIR) on the first three lines, where the installed
transformers has that task (4.x; version 5 removed it: null). --prefix goes before each
source line (a multilingual model's ">>xx<< " tag).
"""
import argparse
import io
import json
import logging

import torch
import transformers
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline


def arguments():
    parser = argparse.ArgumentParser()
    for name in ("dir", "src", "tgt", "out"):
        parser.add_argument(name)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="generate()'s limit (default: the folder's max_length)")
    return parser.parse_args()


def load(folder):
    """The tokenizer and model, and the load's log lines about weights."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    transformers.logging.set_verbosity_info()
    transformers.logging.add_handler(handler)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    transformers.logging.remove_handler(handler)
    transformers.logging.set_verbosity_warning()
    words = ("missing", "unexpected", "newly initialized", "not used", "not initialized")
    notes = [line for line in stream.getvalue().splitlines()
             if any(word in line.lower() for word in words)]
    return tokenizer, model, notes


def main():
    args = arguments()
    tokenizer, model, notes = load(args.dir)
    src = [args.prefix + line.rstrip("\n") for line in open(args.src, encoding="utf-8")]
    tgt = [line.rstrip("\n") for line in open(args.tgt, encoding="utf-8")]
    nll, tokens = 0.0, 0
    greedy, beam = [], []
    with torch.no_grad():
        for s, t in zip(src, tgt):
            inputs = tokenizer(s, return_tensors="pt")
            labels = tokenizer(text_target=t, return_tensors="pt").input_ids
            logits = model(**inputs, labels=labels).logits
            picked = torch.log_softmax(logits.double(), -1)[0].gather(1, labels[0].unsqueeze(1))
            nll -= picked.sum().item()
            tokens += labels.size(1)
            limit = {} if args.max_new_tokens is None else {"max_new_tokens": args.max_new_tokens}
            for out, options in ((greedy, {"num_beams": 1, "do_sample": False}), (beam, {})):
                generated = model.generate(**inputs, **limit, **options)
                out.append(tokenizer.decode(generated[0], skip_special_tokens=True))
    piped = None
    if int(transformers.__version__.split(".")[0]) < 5:
        translate = pipeline("translation", model=args.dir)
        piped = [item["translation_text"] for item in translate(src[:3])]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"load_notes": notes, "nll": nll, "tokens": tokens, "greedy": greedy,
                   "beam": beam, "pipeline": piped}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
