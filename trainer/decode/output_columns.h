// What the columns of a decoding step's logits are: the vocabulary's ids, or with a lexical
// shortlist the ids a batch may produce (model::RestrictedOutput computes those columns alone).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/decode/constraints.h"

namespace tandem::data {
class Shortlist;  // data/shortlist/shortlist.h
}  // namespace tandem::data

namespace tandem::decode {

struct OutputColumns {
  torch::Tensor ids;             // [n] int64 on the models' device; undefined: column i is id i
  std::vector<int64_t> cpu_ids;  // the same on the CPU, sorted

  // Column indices (any shape, on ids' device) → the ids they stand for.
  torch::Tensor to_ids(const torch::Tensor& columns) const;
  // The id column `column` stands for.
  int64_t id_of(int64_t column) const { return ids.defined() ? cpu_ids[column] : column; }
  // The column of `id`; -1 when a shortlist leaves it out.
  int64_t column_of(int64_t id) const;
};

// A batch's columns under `shortlist`: its sources' lists (src [rows, len], padded), the
// frequent ids, EOS and every include phrase's tokens of `constraints`; ids on `device`.
OutputColumns shortlist_columns(const data::Shortlist& shortlist, const torch::Tensor& src,
                                const std::vector<Constraints>& constraints,
                                const torch::Device& device);

}  // namespace tandem::decode
