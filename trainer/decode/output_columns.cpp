#include "trainer/decode/output_columns.h"

#include <algorithm>

#include "data/shortlist/shortlist.h"
#include "trainer/common/token_ids.h"

namespace tandem::decode {

torch::Tensor OutputColumns::to_ids(const torch::Tensor& columns) const {
  return ids.defined() ? ids.index_select(0, columns.flatten()).view(columns.sizes()) : columns;
}

int64_t OutputColumns::column_of(int64_t id) const {
  if (!ids.defined()) return id;
  const auto at = std::lower_bound(cpu_ids.begin(), cpu_ids.end(), id);
  return at != cpu_ids.end() && *at == id ? at - cpu_ids.begin() : -1;
}

OutputColumns shortlist_columns(const data::Shortlist& shortlist, const torch::Tensor& src,
                                const std::vector<Constraints>& constraints,
                                const torch::Device& device) {
  const auto cpu = src.to(torch::kCPU, torch::kLong).contiguous();
  std::vector<std::vector<int32_t>> sources(cpu.size(0));
  auto cell = cpu.accessor<int64_t, 2>();
  for (int64_t r = 0; r < cpu.size(0); ++r) {
    for (int64_t t = 0; t < cpu.size(1); ++t) {
      if (cell[r][t] != kPadId) sources[r].push_back(static_cast<int32_t>(cell[r][t]));
    }
  }
  std::vector<int32_t> extra = {static_cast<int32_t>(kEosId)};
  for (const auto& mine : constraints) {
    for (const auto& phrase : mine.include) extra.insert(extra.end(), phrase.begin(), phrase.end());
  }
  OutputColumns columns;
  columns.cpu_ids = shortlist.candidates(sources, extra);
  columns.ids = torch::tensor(columns.cpu_ids, torch::kLong).to(device);
  return columns;
}

}  // namespace tandem::decode
