#include "trainer/parallel/gradient_reducer.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>

namespace tandem::parallel {
namespace {

constexpr double kBytesPerMb = 1024.0 * 1024.0;

// Runs `fn` once the autograd engine has accumulated a leaf's gradient into .grad: a post hook of
// the leaf's AccumulateGrad node. FunctionPostHook and Node::add_post_hook are the same in
// LibTorch 1.13 and 2.x (2.x adds compiled_args(), which only torch.compile's autograd calls).
class AfterAccumulation : public torch::autograd::FunctionPostHook {
 public:
  explicit AfterAccumulation(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

void check_cap(double mb, const char* what) {
  if (!(mb > 0)) {
    throw std::invalid_argument(std::string("GradientReducer: ") + what + " " + std::to_string(mb) +
                                " MiB: expected a size > 0");
  }
}

double bytes_of(const torch::Tensor& t) {
  return static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
}

}  // namespace

std::vector<std::vector<size_t>> GradientReducer::plan_buckets(
    const std::vector<torch::Tensor>& params, double bucket_cap_mb, double first_bucket_mb) {
  check_cap(bucket_cap_mb, "bucket cap");
  check_cap(first_bucket_mb, "first bucket cap");
  std::vector<std::vector<size_t>> buckets;
  double bytes = 0;  // in the last bucket
  for (size_t i = params.size(); i-- > 0;) {
    const torch::Tensor& p = params[i];
    if (!buckets.empty()) {
      const torch::Tensor& last = params[buckets.back().back()];
      const double cap = (buckets.size() == 1 ? first_bucket_mb : bucket_cap_mb) * kBytesPerMb;
      if (bytes + bytes_of(p) <= cap && p.scalar_type() == last.scalar_type() &&
          p.device() == last.device()) {
        buckets.back().push_back(i);
        bytes += bytes_of(p);
        continue;
      }
    }
    buckets.push_back({i});
    bytes = bytes_of(p);
  }
  return buckets;
}

GradientReducer::GradientReducer(std::vector<torch::Tensor> params, Communicator& comm,
                                 double bucket_cap_mb, double first_bucket_mb,
                                 std::vector<GradientRun> runs)
    : params_(std::move(params)),
      comm_(comm),
      buckets_(plan_buckets(params_, bucket_cap_mb, first_bucket_mb)),
      flat_(buckets_.size()),
      bucket_of_(params_.size()),
      offset_of_(params_.size()),
      copied_(params_.size()),
      waiting_(buckets_.size()),
      solo_(comm.size() == 1) {
  if (solo_) return;  // a world of one: nothing to send, no buckets to fill
  for (size_t b = 0; b < buckets_.size(); ++b) {
    int64_t elements = 0;
    for (size_t i : buckets_[b]) {
      bucket_of_[i] = b;
      offset_of_[i] = elements;
      elements += params_[i].numel();
    }
    if (runs.empty()) flat_[b] = torch::empty({elements}, bucket_options(b));
  }
  if (!runs.empty()) plan_shards(std::move(runs));
  register_hooks();
}

torch::TensorOptions GradientReducer::bucket_options(size_t bucket) const {
  const torch::Tensor& first = params_[buckets_[bucket].front()];
  return torch::TensorOptions().dtype(first.scalar_type()).device(first.device());
}

// Checks that the runs tile every parameter in order, and lists each parameter's.
void GradientReducer::take_runs(std::vector<GradientRun> runs) {
  runs_ = std::move(runs);
  runs_of_.resize(params_.size());
  std::vector<int64_t> covered(params_.size(), 0);
  for (size_t j = 0; j < runs_.size(); ++j) {
    const GradientRun& run = runs_[j];
    if (run.param >= params_.size() || run.begin != covered[run.param] || run.end <= run.begin ||
        run.rank < 0 || run.rank >= comm_.size()) {
      throw std::invalid_argument("GradientReducer: run " + std::to_string(j) +
                                  " does not continue its parameter's runs on a rank of the world");
    }
    covered[run.param] = run.end;
    runs_of_[run.param].push_back(j);
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (covered[i] != params_[i].numel()) {
      throw std::invalid_argument("GradientReducer: the runs of parameter " + std::to_string(i) +
                                  " cover " + std::to_string(covered[i]) + " of its " +
                                  std::to_string(params_[i].numel()) + " elements");
    }
  }
}

// Lays each bucket out rank by rank (within a rank, its runs in bucket order) and makes this
// rank's receiving buffers.
void GradientReducer::plan_shards(std::vector<GradientRun> runs) {
  sharded_ = true;
  take_runs(std::move(runs));
  const int me = comm_.rank();
  run_offset_.resize(runs_.size());
  std::vector<int64_t> own_start(buckets_.size());  // where this rank's runs start in a bucket
  for (size_t b = 0; b < buckets_.size(); ++b) {
    counts_.emplace_back(static_cast<size_t>(comm_.size()), 0);
    int64_t position = 0;
    for (int r = 0; r < comm_.size(); ++r) {
      const int64_t start = position;
      for (size_t i : buckets_[b]) {
        for (size_t j : runs_of_[i]) {
          if (runs_[j].rank != r) continue;
          run_offset_[j] = position;
          position += runs_[j].end - runs_[j].begin;
        }
      }
      counts_[b][r] = position - start;
      if (r == me) own_start[b] = start;
    }
    own_.push_back(torch::empty({counts_[b][me]}, bucket_options(b)));
    // A parameter alone whose runs lie in rank order already is its own bucket's layout.
    const auto& runs = runs_of_[buckets_[b].front()];
    sent_as_is_.push_back(buckets_[b].size() == 1 &&
                          std::all_of(runs.begin(), runs.end(), [&](size_t j) {
                            return run_offset_[j] == runs_[j].begin;
                          }));
  }
  later_.resize(buckets_.size());
  for (size_t j = 0; j < runs_.size(); ++j) {
    const GradientRun& run = runs_[j];
    if (run.rank != me) continue;
    const size_t b = bucket_of_[run.param];
    torch::Tensor own = own_[b].narrow(0, run_offset_[j] - own_start[b], run.end - run.begin);
    const bool whole = run.begin == 0 && run.end == params_[run.param].numel();
    owned_.push_back(whole ? own.view(params_[run.param].sizes()) : own);
  }
}

GradientReducer::~GradientReducer() {
  for (size_t k = 0; k < accumulators_.size(); ++k) accumulators_[k]->del_post_hook(hook_keys_[k]);
}

void GradientReducer::register_hooks() {
  for (size_t i = 0; i < params_.size(); ++i) {
    // Null for a tensor that needs no gradient: end_backward() treats it as unused.
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    if (!accumulator) continue;
    hook_keys_.push_back(accumulator->add_post_hook(
        std::make_unique<AfterAccumulation>([this, i] { on_gradient_ready(i); })));
    accumulators_.push_back(std::move(accumulator));
  }
}

void GradientReducer::prepare_for_backward() {
  const bool next_round = sharded_ && phase_ == Phase::kLaunched;
  if (phase_ != Phase::kIdle && !next_round) {
    throw std::logic_error(
        "GradientReducer::prepare_for_backward: the last reduction is unfinished");
  }
  phase_ = Phase::kBackward;
  if (solo_) return;
  if (next_round) {  // the last micro-batch's sums are in own_ before this one's are sent
    release_done_buckets(0);
    work_.clear();
  }
  later_round_ = next_round;
  std::fill(copied_.begin(), copied_.end(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) waiting_[b] = buckets_[b].size();
  next_launch_ = 0;
  released_ = 0;
  launch_times_.clear();
  launches_.clear();
}

// Called by the autograd engine (on CPU, in the thread that called backward) for every parameter
// whose gradient this backward pass produced; the others are for end_backward().
void GradientReducer::on_gradient_ready(size_t param) {
  if (phase_ != Phase::kBackward) return;  // an earlier micro-batch: accumulate locally only
  if (copied_[param]) {
    throw std::logic_error(
        "GradientReducer: a gradient was accumulated twice in one reduction (more than one "
        "backward pass between prepare_for_backward() and end_backward()?)");
  }
  copy_in(param);
  if (--waiting_[bucket_of_[param]] == 0) launch_ready_buckets();
  if (sharded_) {
    release_done_buckets(kBucketsInFlight);
    return;
  }
  // MPI moves non-blocking collectives only inside MPI calls: poll the oldest one in flight.
  for (auto& work : work_) {
    if (!work->test()) break;
  }
}

torch::Tensor GradientReducer::bucket_view(size_t param) const {
  const torch::Tensor& p = params_[param];
  return flat_[bucket_of_[param]].narrow(0, offset_of_[param], p.numel()).view(p.sizes());
}

// By address and layout, without making a view (it is asked twice per parameter and step).
bool GradientReducer::grad_is_bucket_view(size_t param) const {
  if (solo_ || sharded_) return false;
  const torch::Tensor& grad = params_[param].grad();
  const torch::Tensor& flat = flat_[bucket_of_[param]];
  const char* start = static_cast<const char*>(flat.data_ptr()) +
                      offset_of_[param] * static_cast<int64_t>(flat.element_size());
  return grad.defined() && grad.scalar_type() == flat.scalar_type() &&
         grad.device() == flat.device() && grad.data_ptr() == start &&
         grad.sizes() == params_[param].sizes() && grad.is_contiguous();
}

// A gradient that is its bucket view is there already; any other is copied (none: zeros).
void GradientReducer::copy_in(size_t param) {
  if (sharded_) {
    copy_in_sharded(param);
    return;
  }
  copied_[param] = true;
  if (grad_is_bucket_view(param)) return;
  torch::NoGradGuard no_grad;
  const torch::Tensor& p = params_[param];
  torch::Tensor slice = bucket_view(param);
  if (p.grad().defined()) {
    slice.copy_(p.grad());
  } else {
    slice.zero_();
  }
}

// Sharded: the parameter's runs into its bucket, laid out rank by rank, and its .grad() let go.
// A parameter alone in its bucket whose runs already lie in that order (a large embedding, say)
// is sent as it is, without a copy.
void GradientReducer::copy_in_sharded(size_t param) {
  copied_[param] = true;
  torch::NoGradGuard no_grad;
  torch::Tensor& grad = params_[param].mutable_grad();
  const size_t b = bucket_of_[param];
  if (sent_as_is_[b] && grad.defined() && grad.is_contiguous() &&
      grad.scalar_type() == params_[param].scalar_type()) {
    flat_[b] = grad.view({-1});
  } else {
    if (!flat_[b].defined()) {
      flat_[b] = torch::empty({std::accumulate(counts_[b].begin(), counts_[b].end(), int64_t{0})},
                              bucket_options(b));
    }
    for (size_t j : runs_of_[param]) {
      const GradientRun& run = runs_[j];
      torch::Tensor slice = flat_[b].narrow(0, run_offset_[j], run.end - run.begin);
      if (grad.defined()) {
        slice.copy_(grad.reshape({-1}).narrow(0, run.begin, run.end - run.begin));
      } else {
        slice.zero_();
      }
    }
  }
  grad = torch::Tensor();
}

// Sharded: lets go of the buckets whose reduction is done, oldest first, waiting for the oldest
// while more than `keep` are in flight. A Work let go releases the tensors it kept.
void GradientReducer::release_done_buckets(size_t keep) {
  while (released_ < work_.size()) {
    if (work_.size() - released_ <= keep && !work_[released_]->test()) break;
    work_[released_]->fence();
    work_[released_].reset();
    flat_[released_] = torch::Tensor();
    if (later_[released_].defined()) {
      own_[released_].add_(later_[released_]);
      later_[released_] = torch::Tensor();
    }
    ++released_;
  }
}

// Strictly in bucket order: a bucket ready early waits for its predecessors, so every rank issues
// the same sequence of collectives whatever order its backward pass produced gradients in.
void GradientReducer::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && waiting_[next_launch_] == 0) {
    launch(next_launch_++, /*during_backward=*/true);
  }
}

void GradientReducer::launch(size_t bucket, bool during_backward) {
  if (sharded_) {
    // A step's first round receives into own_, a later one beside it (added once received).
    if (later_round_) later_[bucket] = torch::empty_like(own_[bucket]);
    torch::Tensor& into = later_round_ ? later_[bucket] : own_[bucket];
    work_.push_back(comm_.reduce_scatter_sum_async(flat_[bucket], into, counts_[bucket]));
  } else {
    work_.push_back(comm_.all_reduce_sum_async(flat_[bucket]));
    ++all_reduce_calls_;
  }
  launch_times_.push_back(Clock::now());
  launches_.push_back({static_cast<int64_t>(bucket), 0.0, during_backward});
}

void GradientReducer::end_backward() {
  if (phase_ != Phase::kBackward) {
    throw std::logic_error("GradientReducer::end_backward: prepare_for_backward() was not called");
  }
  backward_end_ = Clock::now();
  if (solo_) {
    phase_ = Phase::kLaunched;
    return;
  }
  for (; next_launch_ < buckets_.size(); ++next_launch_) {
    for (size_t i : buckets_[next_launch_]) {
      if (!copied_[i]) copy_in(i);  // no gradient in this pass: what earlier ones left, or zeros
    }
    waiting_[next_launch_] = 0;
    launch(next_launch_, /*during_backward=*/false);
  }
  for (size_t k = 0; k < launches_.size(); ++k) {
    launches_[k].seconds = std::chrono::duration<double>(launch_times_[k] - backward_end_).count();
  }
  phase_ = Phase::kLaunched;
}

void GradientReducer::finish(double scale) {
  if (phase_ != Phase::kLaunched) {
    throw std::logic_error("GradientReducer::finish: end_backward() was not called");
  }
  torch::NoGradGuard no_grad;
  if (solo_) {
    finish_solo(scale);
    return;
  }
  if (sharded_) {
    release_done_buckets(0);
    for (torch::Tensor& own : own_) own.mul_(scale);
    work_.clear();
    phase_ = Phase::kIdle;
    return;
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    work_[b]->fence();
    flat_[b].mul_(scale);
    for (size_t i : buckets_[b]) {
      // The sum is in the bucket: the gradient becomes (or stays) its view, so the next backward
      // pass accumulates into the bucket in place (autograd adds into a defined .grad()).
      if (!grad_is_bucket_view(i)) params_[i].mutable_grad() = bucket_view(i);
    }
  }
  work_.clear();
  phase_ = Phase::kIdle;
}

// The sum over one rank is the gradient itself: only the scale, in one multi-tensor operation
// (on a GPU, a few kernels instead of a copy in and out of the buckets per parameter).
void GradientReducer::finish_solo(double scale) {
  std::vector<torch::Tensor> grads;
  grads.reserve(params_.size());
  for (torch::Tensor& p : params_) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  if (scale != 1.0 && !grads.empty()) at::_foreach_mul_(grads, scale);
  phase_ = Phase::kIdle;
}

}  // namespace tandem::parallel
