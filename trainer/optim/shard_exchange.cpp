#include "trainer/optim/shard_exchange.h"

#include <algorithm>

namespace tandem::optim {
namespace {

// A buffer of at least `elements` elements of type `options`, kept between calls of one exchange.
class Scratch {
 public:
  explicit Scratch(torch::TensorOptions options) : options_(options) {}
  torch::Tensor take(int64_t elements) {
    if (!buffer_.defined() || buffer_.numel() < elements)
      buffer_ = torch::empty({elements}, options_);
    return buffer_.narrow(0, 0, elements);
  }

 private:
  torch::TensorOptions options_;
  torch::Tensor buffer_;
};

// One broadcast from `owner` of several of its pieces, laid end to end.
void broadcast_together(const std::vector<torch::Tensor>& slices, int owner,
                        parallel::Communicator& comm) {
  if (slices.size() == 1) {
    torch::Tensor only = slices.front();
    comm.broadcast(only, owner);
    return;
  }
  torch::Tensor flat;
  if (comm.rank() == owner) {
    flat = torch::cat(slices);
  } else {
    int64_t elements = 0;
    for (const auto& s : slices) elements += s.numel();
    flat = torch::empty({elements}, slices.front().options());
  }
  comm.broadcast(flat, owner);
  if (comm.rank() == owner) return;
  int64_t offset = 0;
  for (const auto& s : slices) {
    torch::Tensor target = s;
    target.copy_(flat.narrow(0, offset, s.numel()));
    offset += s.numel();
  }
}

// This rank's first piece of parameter `param` in plan.owned() order (its pieces of a parameter
// are consecutive there).
size_t first_owned(const ShardPlan& plan, size_t param) {
  const auto& owned = plan.owned();
  return static_cast<size_t>(
      std::lower_bound(owned.begin(), owned.end(), param,
                       [](const Piece& piece, size_t p) { return piece.param < p; }) -
      owned.begin());
}

}  // namespace

void share_updated(const ShardPlan& plan, const std::vector<torch::Tensor>& params,
                   parallel::Communicator& comm, int64_t chunk_bytes) {
  if (!plan.sharded()) return;
  torch::NoGradGuard no_grad;
  for (int owner = 0; owner < plan.ranks(); ++owner) {
    std::vector<torch::Tensor> chunk;
    int64_t bytes = 0;
    for (const Piece& piece : plan.pieces()) {
      if (piece.rank != owner) continue;
      torch::Tensor slice = ShardPlan::slice(params[piece.param].detach(), piece).view({-1});
      const int64_t slice_bytes = slice.numel() * slice.element_size();
      const bool fits = chunk.empty() || (bytes + slice_bytes <= chunk_bytes &&
                                          slice.scalar_type() == chunk.front().scalar_type());
      if (!fits) {
        broadcast_together(chunk, owner, comm);
        chunk.clear();
        bytes = 0;
      }
      chunk.push_back(slice);
      bytes += slice_bytes;
    }
    if (!chunk.empty()) broadcast_together(chunk, owner, comm);
  }
}

GradientGate gate_sharded_gradients(const std::vector<torch::Tensor>& pieces, double max_norm,
                                    parallel::Communicator& comm, const torch::Device& device) {
  torch::Tensor sum = sum_of_squares_of(pieces).to(device).contiguous();
  comm.all_reduce_sum(sum);
  return gate_of_norm(sum.sqrt_(), max_norm);
}

// Pieces travel one broadcast each (a checkpoint is rare; the copies stay one piece large).
torch::Tensor gather_param(const ShardPlan& plan, size_t param,
                           const std::vector<torch::Tensor>& pieces,
                           const torch::TensorOptions& options, parallel::Communicator& comm,
                           int root) {
  const bool at_root = comm.rank() == root;
  if (!plan.sharded()) return at_root ? pieces[param] : torch::Tensor();
  torch::NoGradGuard no_grad;
  torch::Tensor whole;
  if (at_root) whole = torch::empty(plan.shape(param), options.device(torch::kCPU));
  Scratch scratch(options);
  size_t mine = first_owned(plan, param);
  for (const Piece& piece : plan.pieces()) {
    if (piece.param != param) continue;
    torch::Tensor buffer =
        piece.rank == comm.rank() ? pieces[mine++].view({-1}) : scratch.take(piece.size());
    if (piece.rank != root) comm.broadcast(buffer, piece.rank);
    if (at_root) ShardPlan::slice(whole, piece).view({-1}).copy_(buffer);
  }
  return whole;
}

void scatter_param(const ShardPlan& plan, size_t param, const torch::Tensor& whole,
                   const std::vector<torch::Tensor>& pieces, const torch::TensorOptions& options,
                   parallel::Communicator& comm, int root) {
  const bool at_root = comm.rank() == root;
  torch::NoGradGuard no_grad;
  Scratch scratch(options);
  size_t mine = first_owned(plan, param);
  for (const Piece& piece : plan.pieces()) {
    if (piece.param != param) continue;
    torch::Tensor buffer =
        plan.holds(piece) ? pieces[mine++].view({-1}) : scratch.take(piece.size());
    if (at_root) buffer.copy_(ShardPlan::slice(whole.contiguous(), piece).reshape({-1}));
    if (piece.rank != root) comm.broadcast(buffer, root);
  }
}

}  // namespace tandem::optim
