#!/usr/bin/env python3
"""LoRA fine-tuning of a Hugging Face M2M100ForConditionalGeneration (NLLB layout) with Hugging
Face peft, the yardstick of Tandem's LoRA (tests/e2e/lora_test.cpp).

  lora_reference.py MODEL_DIR SETTINGS_JSON SRC TGT SRC_LANG TGT_LANG OUT_JSON

SETTINGS_JSON holds rank, alpha, targets (peft's target_modules), lr, beta1, beta2, eps, steps,
and the adapters' initial A matrices under Tandem's names (lora_a of
encoder.layers.0.self_attn.q_proj, ...), which replace peft's own draws (B starts at zero in
both); with int8_base true, the base's weight matrices are first replaced by what Tandem's int8
holds of them (per row: scale = max |w| / 127, or 1 for a zero row; round half to even; q · scale). Every step trains on all the pairs of SRC/TGT at once (tokenized by NllbTokenizer with the
languages' codes), dropout 0, Adam without weight decay; OUT_JSON gets each step's loss (the mean
cross-entropy of the target tokens, before that step's update).
"""
import json, sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import M2M100ForConditionalGeneration, NllbTokenizer


def peft_name(tandem_name):
    """encoder.layers.0.self_attn.q_proj.lora_a -> peft's name of the same matrix."""
    path, matrix = tandem_name.rsplit(".", 1)
    path = path.replace(".cross_attn.", ".encoder_attn.").replace(".ffn.", ".")
    return "base_model.model.model." + path + (".lora_A" if matrix == "lora_a" else ".lora_B") + \
        ".default.weight"


def dequantized_int8(weight):
    """weight [rows, cols] as Tandem's int8 rows hold it (kernels::quantize_rows), in float32."""
    top = weight.abs().amax(1)
    scale = torch.where(top > 0, top / 127.0, torch.ones_like(top))
    return (weight / scale[:, None]).round().clamp(-127, 127) * scale[:, None]


def main():
    model_dir, settings_path, src_path, tgt_path, src_lang, tgt_lang, out = sys.argv[1:8]
    settings = json.load(open(settings_path))
    src = [line.rstrip("\n") for line in open(src_path, encoding="utf-8")]
    tgt = [line.rstrip("\n") for line in open(tgt_path, encoding="utf-8")]
    torch.manual_seed(0)
    model = M2M100ForConditionalGeneration.from_pretrained(
        model_dir, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    if settings.get("int8_base", False):
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 2:
                    p.copy_(dequantized_int8(p.float()))
    tokenizer = NllbTokenizer.from_pretrained(model_dir, src_lang=src_lang, tgt_lang=tgt_lang)
    batch = tokenizer(src, text_target=tgt, padding=True, return_tensors="pt")
    labels = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    model = get_peft_model(model, LoraConfig(
        r=settings["rank"], lora_alpha=settings["alpha"], lora_dropout=0.0,
        target_modules=settings["targets"], bias="none"))
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, values in settings["lora_a"].items():
            params[peft_name(name)].copy_(torch.tensor(values, dtype=torch.float32))
    copied = {peft_name(name) for name in settings["lora_a"]}
    trained = [name for name, p in params.items() if p.requires_grad]
    if sorted(name for name in trained if "lora_A" in name) != sorted(copied):
        sys.exit("peft adapted other layers than Tandem: " + ", ".join(sorted(trained)))
    if any(params[name].abs().sum() != 0 for name in trained if "lora_B" in name):
        sys.exit("peft's B does not start at zero")
    optimizer = torch.optim.Adam([params[name] for name in trained], lr=settings["lr"],
                                 betas=(settings["beta1"], settings["beta2"]),
                                 eps=settings["eps"], weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(settings["steps"]):
        loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     labels=labels).loss
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    json.dump({"losses": losses, "trained": len(trained)}, open(out, "w"))


if __name__ == "__main__":
    main()
