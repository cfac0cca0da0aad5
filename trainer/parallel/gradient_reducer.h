// Summing gradients over ranks in flat buckets, each all-reduced (non-blocking) during the backward
// pass as soon as all its gradients are accumulated, in the same bucket order on every rank.
#pragma once

#include <torch/csrc/autograd/function.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/parallel/communicator.h"

namespace tandem::parallel {

// A run of one parameter's elements (in its flattened order) whose summed gradient one rank keeps
// when gradients are sharded (ZeRO stage 2): the optimizer's ShardPlan pieces.
struct GradientRun {
  size_t param = 0;  // index in the reducer's parameter list
  int64_t begin = 0;
  int64_t end = 0;  // one past the last element
  int rank = 0;
};

// One bucket's all-reduce in the last reduction, for tests and benchmarks.
struct BucketLaunch {
  int64_t bucket = 0;
  double seconds = 0;            // launch time minus the end of the backward pass (< 0: before)
  bool during_backward = false;  // launched by a gradient hook, not by end_backward()
};

// As PyTorch DDP: parameters, in reverse registration order (about the order backward produces
// their gradients), form buckets of at most bucket_cap_mb, the first smaller so communication
// starts early. A rank without data contributes zeros, so N ranks equal one process that saw
// every rank's batch. As DDP's gradient_as_bucket_view: after the first reduction each .grad() is
// a view into its bucket, so backward accumulates straight into the buckets and nothing is copied
// in or out; a gradient someone replaced with another tensor is copied in and becomes a view again.
//
// With gradients sharded (ZeRO stage 2, `runs` given): a bucket's elements are laid out grouped
// by the rank that keeps them and reduce-scattered, so that each rank receives the sums of its own
// runs only, into buffers of its own (owned_gradients()). A parameter's .grad() is let go as soon
// as it is in its bucket, and the bucket once its reduction is done (a few buckets in flight at a
// time): a rank keeps 1/N of the gradients across a step. With gradient accumulation every
// micro-batch is a round of its own (prepare_for_backward() and end_backward() around each, on
// every rank alike), whose sums are added to the rank's: no whole gradient outlives a micro-batch.
// The sum over ranks and micro-batches is then grouped by micro-batch, not by rank as without
// sharded gradients, so it may round otherwise.
class GradientReducer {
 public:
  static constexpr double kDefaultBucketCapMb = 25.0;
  static constexpr double kDefaultFirstBucketMb = 1.0;
  // Sharded: buckets whose reduction may be in flight at once (more wait for the oldest).
  static constexpr size_t kBucketsInFlight = 2;

  // The parameters' grad accumulators get hooks for the reducer's lifetime (not in a world of one,
  // where finish() only scales). Caps are in MiB, > 0.
  // `runs`: empty, or every parameter's elements cut into runs in parameter and element order,
  // each kept by one rank (gradients sharded; ignored in a world of one).
  GradientReducer(std::vector<torch::Tensor> params, Communicator& comm,
                  double bucket_cap_mb = kDefaultBucketCapMb,
                  double first_bucket_mb = kDefaultFirstBucketMb,
                  std::vector<GradientRun> runs = {});
  ~GradientReducer();  // removes the hooks, completes reductions in flight
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // One reduction per optimizer step, on every rank:
  //   prepare_for_backward()  right before the backward pass that completes the step's gradients
  //                           (the last micro-batch with data; earlier ones only accumulate);
  //                           sharded: before each micro-batch, after the last one's end_backward();
  //   end_backward()          after it (or with no backward at all), before any other collective:
  //                           launches, in order, the buckets still waiting (unused parameters);
  //   finish(scale)           grad <- scale * sum over ranks of grad; undefined grads count as
  //                           zero and are defined afterwards. Sharded: owned_gradients() <- scale
  //                           * the sums of this rank's runs, and every .grad() is undefined.
  void prepare_for_backward();
  void end_backward();
  void finish(double scale);

  // Parameter indices (into the constructor's list) of every bucket, in launch order.
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }
  int64_t all_reduce_calls() const { return all_reduce_calls_; }  // since construction
  // A world of one: gradients are not kept in buckets (finish() only scales them).
  bool solo() const { return solo_; }
  bool sharded() const { return sharded_; }
  // Sharded: the summed gradients of this rank's runs, in the runs' order (a run covering its
  // parameter whole shaped like it, else flat), valid after finish() until the next reduction.
  const std::vector<torch::Tensor>& owned_gradients() const { return owned_; }
  const std::vector<BucketLaunch>& last_launches() const { return launches_; }
  // Whether parameter `param`'s .grad() is its slice of a bucket (not in a world of one).
  bool grad_is_bucket_view(size_t param) const;

  // Parameter indices grouped as the constructor does: reverse order, a new bucket when the next
  // tensor would exceed the cap (a tensor larger than the cap gets a bucket of its own) or has
  // another dtype or device.
  static std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                                       double bucket_cap_mb,
                                                       double first_bucket_mb);

 private:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kIdle, kBackward, kLaunched };

  torch::TensorOptions bucket_options(size_t bucket) const;  // its parameters' dtype and device
  void register_hooks();
  void on_gradient_ready(size_t param);
  void copy_in(size_t param);
  torch::Tensor bucket_view(size_t param) const;  // the parameter's slice, shaped like it
  void launch_ready_buckets();
  void launch(size_t bucket, bool during_backward);
  void finish_solo(double scale);
  void take_runs(std::vector<GradientRun> runs);
  void plan_shards(std::vector<GradientRun> runs);
  void copy_in_sharded(size_t param);
  void release_done_buckets(size_t keep_in_flight);

  std::vector<torch::Tensor> params_;
  Communicator& comm_;
  std::vector<std::vector<size_t>> buckets_;
  // Per bucket, [elements] of its dtype, reused every step (sharded: made and let go each step).
  std::vector<torch::Tensor> flat_;
  std::vector<size_t> bucket_of_;    // per parameter
  std::vector<int64_t> offset_of_;   // per parameter: its first element in its bucket
  // The parameters' AccumulateGrad nodes, kept alive: they hold the hooks.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;

  Phase phase_ = Phase::kIdle;
  std::vector<bool> copied_;     // per parameter, this reduction
  std::vector<size_t> waiting_;  // per bucket: parameters not yet copied in
  size_t next_launch_ = 0;
  std::vector<std::unique_ptr<Work>> work_;  // per launched bucket
  Clock::time_point backward_end_;
  std::vector<Clock::time_point> launch_times_;
  std::vector<BucketLaunch> launches_;
  int64_t all_reduce_calls_ = 0;
  bool solo_ = false;  // a world of one: no hooks, buckets or collectives

  // Gradients sharded: flat_[b] is filled during backward and let go once its reduction is done.
  bool sharded_ = false;
  std::vector<GradientRun> runs_;
  std::vector<std::vector<size_t>> runs_of_;  // per parameter: its runs
  std::vector<int64_t> run_offset_;           // per run: its first element in its bucket
  std::vector<std::vector<int64_t>> counts_;  // per bucket: elements kept by each rank
  std::vector<torch::Tensor> own_;            // per bucket: the sums of this rank's runs
  std::vector<torch::Tensor> owned_;          // per run of this rank: its part of own_
  std::vector<bool> sent_as_is_;              // per bucket: its one parameter's gradient, uncopied
  std::vector<torch::Tensor> later_;          // per bucket: a later round's sums, until added
  size_t released_ = 0;                       // launched buckets whose reduction is done
  bool later_round_ = false;                   // not the step's first micro-batch
};

}  // namespace tandem::parallel
