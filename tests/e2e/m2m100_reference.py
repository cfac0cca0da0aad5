#!/usr/bin/env python3
"""A small M2M-100-family model with random weights, in the NLLB-200 or the M2M-100 layout, built
and run by Hugging Face transformers: what tandem-import's M2M-100 test imports and compares with
(tests/e2e/import_m2m100_test.cpp).

  m2m100_reference.py OUT KIND TEXT SRC_TEST TGT_TEST SRC_LANG TGT_LANG RAW MAX_NEW_TOKENS

KIND is nllb or m2m100; or nllb-600M, nllb-1.3B or nllb-3.3B, which only write the folder of a
model of NLLB-200-distilled-600M's, NLLB-200-1.3B's or NLLB-200-3.3B's exact shape (their
config.json's values, 256,206 ids) with random weights, as safetensors in shards of at most 2 GB,
and the tokenizer made from TEXT, for the memory benchmarks (docs/fine-tuning.md); the other
arguments are then not read. Trains a SentencePiece BPE model on TEXT (both languages' lines), makes
the tokenizer of KIND from it as the published folders hold it (NLLB: sentencepiece.bpe.model with
the language codes listed in tokenizer_config.json, saved by NllbTokenizer as tokenizer.json and
tokenizer_config.json; M2M-100: sentencepiece.bpe.model and a vocab.json whose ids are not
SentencePiece's, saved by M2M100Tokenizer), builds an M2M100ForConditionalGeneration of a small
shape (NLLB: two rows more than the tokenizer has ids, as NLLB-200's 256206 for 256204), saves it
into OUT/model (NLLB: safetensors in shards with their index; M2M-100: pytorch_model.bin), and
writes OUT/reference.json: per test line the tokenizer's ids of source (SRC_LANG) and target
(TGT_LANG), the teacher-forced log-probability of every target token, and the greedy and beam-4
translations with the target's code forced first (MAX_NEW_TOKENS at most, the code included),
as ids and as text; and the source ids of each line of RAW (accents, digits, punctuation, a
character the vocabulary lacks).
"""
import json, os, shutil, sys

import sentencepiece as spm
import torch
from transformers import (M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer,
                          NllbTokenizer)
from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES as NLLB_CODES

LENGTH_PENALTY = 0.6  # tandem-decode's default --lenpen


def lines(path):
    return [line.rstrip("\n") for line in open(path, encoding="utf-8")]


def nllb_tokenizer(out, folder, sp_model, src_lang, tgt_lang):
    staging = os.path.join(out, "nllb-staging")
    os.makedirs(staging, exist_ok=True)
    shutil.copy(sp_model, os.path.join(staging, "sentencepiece.bpe.model"))
    with open(os.path.join(staging, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "NllbTokenizer", "additional_special_tokens": NLLB_CODES,
                   "src_lang": src_lang, "tgt_lang": tgt_lang, "legacy_behaviour": False}, f)
    NllbTokenizer.from_pretrained(staging).save_pretrained(folder)
    shutil.copy(sp_model, os.path.join(folder, "sentencepiece.bpe.model"))
    tokenizer = NllbTokenizer.from_pretrained(folder, src_lang=src_lang, tgt_lang=tgt_lang)
    return tokenizer, len(tokenizer) + 2


def m2m100_tokenizer(out, folder, sp_model, src_lang, tgt_lang):
    sp = spm.SentencePieceProcessor(model_file=sp_model)
    # fairseq's dictionary orders pieces by frequency, not as SentencePiece does: reversed here,
    # so that only vocab.json gives the right ids.
    pieces = [sp.id_to_piece(i) for i in range(3, sp.get_piece_size())][::-1]
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    with open(os.path.join(out, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False)
    M2M100Tokenizer(vocab_file=os.path.join(out, "vocab.json"), spm_file=sp_model,
                    src_lang=src_lang, tgt_lang=tgt_lang).save_pretrained(folder)
    tokenizer = M2M100Tokenizer.from_pretrained(folder, src_lang=src_lang, tgt_lang=tgt_lang)
    return tokenizer, len(vocab) + 100 + 8  # the codes, then fairseq's 8 made-up words


# NLLB-200-distilled-600M's config.json, as published.
NLLB_600M = dict(vocab_size=256206, d_model=1024, encoder_layers=12, decoder_layers=12,
                 encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                 decoder_ffn_dim=4096, max_position_embeddings=1024, activation_function="relu",
                 dropout=0.1, attention_dropout=0.1, activation_dropout=0.0, encoder_layerdrop=0,
                 decoder_layerdrop=0, scale_embedding=True, pad_token_id=1, bos_token_id=0,
                 eos_token_id=2, decoder_start_token_id=2)
# NLLB-200-1.3B's and NLLB-200-3.3B's config.json differ from it only in these values.
PUBLISHED = {"nllb-600M": NLLB_600M,
             "nllb-1.3B": dict(NLLB_600M, encoder_layers=24, decoder_layers=24,
                               encoder_ffn_dim=8192, decoder_ffn_dim=8192),
             "nllb-3.3B": dict(NLLB_600M, d_model=2048, encoder_layers=24, decoder_layers=24,
                               encoder_ffn_dim=8192, decoder_ffn_dim=8192)}


def main():
    out, kind, text = sys.argv[1:4]
    folder = os.path.join(out, "model")
    os.makedirs(folder, exist_ok=True)
    prefix = os.path.join(out, "sp")
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=700,
                                   model_type="bpe", character_coverage=1.0, minloglevel=2,
                                   num_threads=1)
    if kind in PUBLISHED:
        nllb_tokenizer(out, folder, prefix + ".model", "eng_Latn", "spa_Latn")
        torch.manual_seed(17)
        M2M100ForConditionalGeneration(M2M100Config(**PUBLISHED[kind])).save_pretrained(
            folder, max_shard_size="2GB")
        return
    src_test, tgt_test, src_lang, tgt_lang, raw = sys.argv[4:9]
    max_new = int(sys.argv[9])
    make = nllb_tokenizer if kind == "nllb" else m2m100_tokenizer
    tokenizer, vocab_size = make(out, folder, prefix + ".model", src_lang, tgt_lang)

    config = M2M100Config(
        vocab_size=vocab_size, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_position_embeddings=128, activation_function="relu",
        dropout=0.1, attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
        decoder_layerdrop=0.0, scale_embedding=True, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None)
    torch.manual_seed(17)
    model = M2M100ForConditionalGeneration(config)
    with torch.no_grad():  # every weight away from its initial value, so each mapping shows
        for name, p in model.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if p.dim() > 1 else 0.05))
        model.model.shared.weight[config.pad_token_id].zero_()  # as trained models keep it
    model.eval()
    if kind == "nllb":
        model.save_pretrained(folder, max_shard_size="100KB")
    else:
        model.save_pretrained(folder, safe_serialization=False)

    code = tokenizer.convert_tokens_to_ids(tgt_lang if kind == "nllb" else f"__{tgt_lang}__")
    codes = set(tokenizer.convert_tokens_to_ids(NLLB_CODES) if kind == "nllb" else
                tokenizer.lang_token_to_id.values())
    src = lines(src_test)
    tgt = lines(tgt_test)
    src_ids = [tokenizer(line).input_ids for line in src]
    tgt_ids = [tokenizer(text_target=line).input_ids for line in tgt]
    raw_ids = [tokenizer(line).input_ids for line in lines(raw)]
    logprobs, outputs = [], {"greedy": [], "beam4": []}
    with torch.no_grad():
        for s, t in zip(src_ids, tgt_ids):
            labels = torch.tensor([t])
            decoder_in = torch.tensor([[config.decoder_start_token_id] + t[:-1]])
            logits = model(input_ids=torch.tensor([s]), decoder_input_ids=decoder_in).logits
            lp = torch.log_softmax(logits.double(), -1)[0].gather(1, labels[0].unsqueeze(1))
            logprobs.append(lp.squeeze(1).tolist())
        for s in src_ids:
            for key, beams in (("greedy", 1), ("beam4", 4)):
                generated = model.generate(
                    input_ids=torch.tensor([s]), num_beams=beams, do_sample=False,
                    max_new_tokens=max_new, forced_bos_token_id=code,
                    length_penalty=LENGTH_PENALTY, early_stopping=True, min_length=0)
                ids = generated[0].tolist()[1:]  # after the decoder's start
                while ids and ids[-1] == config.pad_token_id:
                    ids.pop()
                assert ids[0] == code, ids
                # Without the language codes, which M2M100Tokenizer.decode keeps (transformers
                # 5 no longer counts them as special) and NllbTokenizer's leaves out.
                text = tokenizer.decode([i for i in ids[1:] if i not in codes],
                                        skip_special_tokens=True)
                outputs[key].append({"ids": ids, "text": text})
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"src_ids": src_ids, "tgt_ids": tgt_ids, "raw_ids": raw_ids,
                   "logprobs": logprobs, "code": code, **outputs}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
