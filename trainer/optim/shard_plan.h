// Which rank keeps the optimizer state of which part of each parameter when that state is sharded
// across data-parallel ranks (ZeRO stage 1, as fairseq's --zero-sharding os and Megatron's
// distributed optimizer); one piece per parameter, held by every rank, when it is not.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tandem::optim {

// A contiguous run of one parameter's elements (in its flattened order) and the rank that keeps
// Adam's moments and the moving average for it and updates it.
struct Piece {
  size_t param = 0;  // index in the parameter list
  int64_t begin = 0;
  int64_t end = 0;  // one past the last element
  int rank = 0;     // kEveryRank: every rank holds and updates it (state not sharded)

  int64_t size() const { return end - begin; }
};

inline constexpr int kEveryRank = -1;

// The parameters' elements, laid end to end in parameter order, cut into `ranks` runs of nearly
// equal length, rank 0 first; a cut inside a parameter falls on a multiple of kPieceAlignment
// elements from its start. The alignment is a precaution for bit-exactness: a vectorised CPU kernel
// (the moving average's lerp, say) may treat a tensor's last few elements with scalar code that
// rounds differently, and an aligned piece leaves to that tail exactly the elements an unsharded
// update leaves to it (docs/configs.md says where it was seen to matter). Aligned pieces also
// start on 256-byte boundaries, as vectorised loads like. Shards differ from 1/N by less than
// kPieceAlignment elements per cut parameter.
class ShardPlan {
 public:
  static constexpr int64_t kPieceAlignment = 64;

  // Not sharded: every parameter whole, held and updated by every rank.
  explicit ShardPlan(std::vector<std::vector<int64_t>> shapes);
  // Sharded over `ranks` ranks, seen from rank `rank`.
  ShardPlan(std::vector<std::vector<int64_t>> shapes, int ranks, int rank);

  // The shapes of the (named) parameters' tensors.
  static std::vector<std::vector<int64_t>> shapes_of(
      const std::vector<std::pair<std::string, torch::Tensor>>& params);

  bool sharded() const { return ranks_ > 0; }
  int ranks() const { return ranks_; }  // 0 when not sharded
  int rank() const { return rank_; }
  size_t params() const { return shapes_.size(); }
  const std::vector<int64_t>& shape(size_t param) const { return shapes_[param]; }
  int64_t numel(size_t param) const;

  // Every rank's pieces in parameter order (and element order within a parameter).
  const std::vector<Piece>& pieces() const { return pieces_; }
  // This rank's pieces, in the same order.
  const std::vector<Piece>& owned() const { return owned_; }
  bool holds(const Piece& piece) const { return piece.rank == kEveryRank || piece.rank == rank_; }
  // Elements whose state rank `rank` keeps (every element when not sharded).
  int64_t elements_of(int rank) const;

  // The piece's elements of `tensor` (of the piece's parameter's shape, contiguous): the tensor
  // itself for a whole parameter, else a flat view sharing its storage.
  static torch::Tensor slice(const torch::Tensor& tensor, const Piece& piece);
  // This rank's pieces of `tensors` (one per parameter, in order), named after their parameter.
  std::vector<std::pair<std::string, torch::Tensor>> owned_slices(
      const std::vector<std::pair<std::string, torch::Tensor>>& tensors) const;

 private:
  std::vector<std::vector<int64_t>> shapes_;
  int ranks_ = 0;
  int rank_ = 0;
  std::vector<Piece> pieces_;
  std::vector<Piece> owned_;
};

}  // namespace tandem::optim
