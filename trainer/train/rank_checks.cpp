#include "trainer/train/rank_checks.h"

#include <sstream>
#include <stdexcept>
#include <string>

#include "trainer/parallel/process_group.h"

namespace tandem::train {

void check_same_layout(const checkpoint::NamedTensors& params, parallel::Communicator& comm) {
  std::vector<std::string> items;
  for (const auto& [name, p] : params) {
    std::ostringstream item;
    item << name << ' ' << p.sizes() << ' ' << p.dtype();
    items.push_back(item.str());
  }
  auto hashes = comm.all_gather(parallel::stable_hash(items));
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) {
      throw std::runtime_error("parameter layout differs between rank 0 and rank " +
                               std::to_string(r) + " (different config or build?)");
    }
  }
}

void check_parameters_agree(const std::vector<torch::Tensor>& params, int64_t step,
                            parallel::Communicator& comm) {
  std::vector<std::string> bytes;
  for (const auto& param : params) {
    const torch::Tensor p = param.detach().to(torch::kCPU).contiguous();
    bytes.emplace_back(static_cast<const char*>(p.data_ptr()), p.numel() * p.element_size());
  }
  const auto hashes = comm.all_gather(parallel::stable_hash(bytes));
  std::string differing;
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) differing += (differing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!differing.empty()) {
    throw std::runtime_error("step " + std::to_string(step) + ": parameters of rank(s) " +
                             differing + " differ from rank 0's; stopping");
  }
}

}  // namespace tandem::train
