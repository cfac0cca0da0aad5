#include "trainer/optim/shard_plan.h"

#include <algorithm>
#include <stdexcept>

namespace tandem::optim {
namespace {

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t size : shape) n *= size;
  return n;
}

// Rounds a cut inside a parameter to the nearest aligned element, within [0, numel].
int64_t aligned_cut(int64_t cut, int64_t numel) {
  const int64_t a = ShardPlan::kPieceAlignment;
  return std::clamp((cut + a / 2) / a * a, int64_t{0}, numel);
}

}  // namespace

ShardPlan::ShardPlan(std::vector<std::vector<int64_t>> shapes) : shapes_(std::move(shapes)) {
  for (size_t i = 0; i < shapes_.size(); ++i) {
    pieces_.push_back({i, 0, numel(i), kEveryRank});
  }
  owned_ = pieces_;
}

// Rank r's run of the laid-out elements is [r·T/N, (r+1)·T/N); a parameter crossing a boundary is
// cut at the aligned element nearest to it.
ShardPlan::ShardPlan(std::vector<std::vector<int64_t>> shapes, int ranks, int rank)
    : shapes_(std::move(shapes)), ranks_(ranks), rank_(rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    throw std::invalid_argument("shard plan: rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks));
  }
  int64_t total = 0;
  for (size_t i = 0; i < shapes_.size(); ++i) total += numel(i);
  const auto boundary = [&](int r) { return total / ranks * r + total % ranks * r / ranks; };
  int64_t offset = 0;  // where parameter i starts in the layout
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const int64_t n = numel(i);
    int64_t begin = 0;
    for (int r = 0; r < ranks && begin < n; ++r) {
      const int64_t end = r + 1 == ranks ? n : aligned_cut(boundary(r + 1) - offset, n);
      if (end <= begin) continue;
      pieces_.push_back({i, begin, end, r});
      begin = end;
    }
    offset += n;
  }
  for (const Piece& piece : pieces_) {
    if (piece.rank == rank_) owned_.push_back(piece);
  }
}

std::vector<std::vector<int64_t>> ShardPlan::shapes_of(
    const std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& [name, p] : params) shapes.push_back(p.sizes().vec());
  return shapes;
}

int64_t ShardPlan::numel(size_t param) const { return elements(shapes_[param]); }

int64_t ShardPlan::elements_of(int rank) const {
  int64_t n = 0;
  for (const Piece& piece : pieces_) {
    if (piece.rank == kEveryRank || piece.rank == rank) n += piece.size();
  }
  return n;
}

torch::Tensor ShardPlan::slice(const torch::Tensor& tensor, const Piece& piece) {
  if (piece.begin == 0 && piece.end == tensor.numel()) return tensor;
  return tensor.view({-1}).narrow(0, piece.begin, piece.size());
}

std::vector<std::pair<std::string, torch::Tensor>> ShardPlan::owned_slices(
    const std::vector<std::pair<std::string, torch::Tensor>>& tensors) const {
  std::vector<std::pair<std::string, torch::Tensor>> slices;
  for (const Piece& piece : owned_) {
    const auto& [name, tensor] = tensors[piece.param];
    slices.emplace_back(name, slice(tensor.detach(), piece));
  }
  return slices;
}

}  // namespace tandem::optim
