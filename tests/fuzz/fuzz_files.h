// The real files the corpus, checkpoint, vocab and text targets start from, made once per process
// by Tandem's own code in a scratch folder: a corpus tandem-prep's code wrote (synthetic text, its
// SentencePiece vocabulary trained), and a tiny model's checkpoint checkpoint::save wrote.
#pragma once

#include <string>

#include "data/vocab/vocab.h"

namespace tandem::fuzz {

// The process's scratch folder (removed at exit) and a file in it with `bytes` as its content.
const std::string& scratch_dir();
std::string write_scratch(const std::string& name, const std::string& bytes);
std::string read_whole(const std::string& path);

const std::string& base_corpus();       // corpus.h5: train 24, valid 4, test 4 pairs
const data::Vocab& base_vocab();        // its joint vocabulary (64 pieces)
const std::string& base_checkpoint();   // a 1+1-layer d_model 8 model on that vocabulary, with
                                        // EMA, optimizer state, RNG and validation history
const std::string& base_config_yaml();  // that model's resolved config

}  // namespace tandem::fuzz
