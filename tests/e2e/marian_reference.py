#!/usr/bin/env python3
"""A small MarianMT (OPUS-MT shape) model with random weights, built and run by Hugging Face
transformers: what tandem-import's test imports and compares with (tests/e2e/import_test.cpp).

  marian_reference.py OUT SRC_TRAIN TGT_TRAIN SRC_TEST TGT_TEST MAX_NEW_TOKENS

Trains a SentencePiece model per side, joins their pieces into one vocab.json as Marian's
conversion does (</s> 0, <unk> 1, ..., <pad> last), with the language tokens >>a<< and >>b<< of a
multilingual OPUS-MT model (ids 2 and 3), saves the model folder into OUT/model
(model.safetensors) and again into OUT/model-bin (pytorch_model.bin, torch.save's format), and
writes OUT/reference.json: per test line
the MarianTokenizer ids of source and target, the teacher-forced log-probability of every target
token, and the greedy translation (MAX_NEW_TOKENS at most); and the ids of each test source with
">>a<< " before it (tagged_src_ids), which MarianTokenizer gives the tag's id.
"""
import json, os, sys

import sentencepiece as spm
import torch
from transformers import MarianConfig, MarianMTModel, MarianTokenizer


def train_spm(text, prefix, size):
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=size,
                                   model_type="unigram", character_coverage=1.0,
                                   hard_vocab_limit=False,
                                   bos_id=-1, eos_id=1, unk_id=0, pad_id=-1,
                                   minloglevel=2, num_threads=1)
    return prefix + ".model"


def main():
    out, src_train, tgt_train, src_test, tgt_test = sys.argv[1:6]
    max_new = int(sys.argv[6])
    folder = os.path.join(out, "model")
    os.makedirs(folder, exist_ok=True)
    src_model = train_spm(src_train, os.path.join(out, "src"), 150)
    tgt_model = train_spm(tgt_train, os.path.join(out, "tgt"), 170)

    # The joint vocabulary: Marian's specials first, the two sides' pieces in order, pad last.
    pieces = ["</s>", "<unk>", ">>a<<", ">>b<<"]
    for path in (src_model, tgt_model):
        sp = spm.SentencePieceProcessor(model_file=path)
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if not sp.is_control(i) and not sp.is_unknown(i) and piece not in pieces:
                pieces.append(piece)
    pieces.append("<pad>")
    vocab = {piece: i for i, piece in enumerate(pieces)}
    with open(os.path.join(out, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False)
    tokenizer = MarianTokenizer(vocab=os.path.join(out, "vocab.json"), source_spm=src_model,
                                target_spm=tgt_model)
    tokenizer.save_pretrained(folder)

    v, pad = len(pieces), len(pieces) - 1
    config = MarianConfig(
        vocab_size=v, decoder_vocab_size=v, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, activation_function="swish", scale_embedding=True,
        max_position_embeddings=128, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, bad_words_ids=[[pad]], dropout=0.1, attention_dropout=0.0,
        activation_dropout=0.0, share_encoder_decoder_embeddings=True)
    torch.manual_seed(11)
    model = MarianMTModel(config)
    with torch.no_grad():  # every weight away from its initial value, so each mapping shows
        for name, p in model.named_parameters():
            if "embed_positions" not in name:  # matrices more than biases and norms
                p.add_(torch.randn_like(p) * (0.3 if p.dim() > 1 else 0.05))
        model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias) * 0.1)
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder + "-bin")
    model.save_pretrained(folder + "-bin", safe_serialization=False)

    src = [line.rstrip("\n") for line in open(src_test, encoding="utf-8")]
    tgt = [line.rstrip("\n") for line in open(tgt_test, encoding="utf-8")]
    src_ids = [tokenizer(line).input_ids for line in src]
    tagged_src_ids = [tokenizer(">>a<< " + line).input_ids for line in src]
    tgt_ids = [tokenizer(text_target=line).input_ids for line in tgt]
    logprobs, greedy = [], []
    with torch.no_grad():
        for s, t in zip(src_ids, tgt_ids):
            labels = torch.tensor([t])
            decoder_in = torch.tensor([[pad] + t[:-1]])
            logits = model(input_ids=torch.tensor([s]), decoder_input_ids=decoder_in).logits
            lp = torch.log_softmax(logits.double(), -1)[0].gather(1, labels[0].unsqueeze(1))
            logprobs.append(lp.squeeze(1).tolist())
        for s in src_ids:
            # bad_words_ids given here too: transformers 5 leaves the config's out of generation,
            # and OPUS-MT models never emit <pad> (Marian's decoder cannot).
            generated = model.generate(input_ids=torch.tensor([s]), num_beams=1, do_sample=False,
                                       max_new_tokens=max_new, bad_words_ids=[[pad]])
            greedy.append(tokenizer.decode(generated[0], skip_special_tokens=True))
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"src_ids": src_ids, "tgt_ids": tgt_ids, "logprobs": logprobs,
                   "greedy": greedy, "tagged_src_ids": tagged_src_ids}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
