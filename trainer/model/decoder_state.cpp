#include "trainer/model/decoder_state.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace tandem::model {
namespace {

constexpr int64_t kFirstCapacity = 16;  // positions, when nobody reserved

std::string row_text(int64_t row) { return "DecoderState::select: row " + std::to_string(row); }

// Cache buffers (1-d, contiguous, CPU) of decoder states that ended on this thread.
thread_local std::vector<torch::Tensor> spare_buffers;
constexpr size_t kSpareBuffers = 16;

// A buffer of at least `numel` elements: the smallest spare that fits, else a new one rounded up
// to a power of two (the next batches' caches then fit it; pages never touched cost nothing).
torch::Tensor cache_buffer(int64_t numel, const torch::TensorOptions& options) {
  if (!options.device().is_cpu()) return torch::empty({numel}, options);
  auto fits = spare_buffers.end();
  for (auto it = spare_buffers.begin(); it != spare_buffers.end(); ++it) {
    if (it->dtype() == options.dtype() && it->numel() >= numel &&
        (fits == spare_buffers.end() || it->numel() < fits->numel())) {
      fits = it;
    }
  }
  if (fits == spare_buffers.end()) {
    int64_t rounded = 1;
    while (rounded < numel) rounded *= 2;
    return torch::empty({rounded}, options);
  }
  auto buffer = std::move(*fits);
  spare_buffers.erase(fits);
  return buffer;
}

// Keeps `buffer` for a later cache_buffer() when nothing else uses its memory.
void spare(torch::Tensor buffer) {
  if (!buffer.defined() || !buffer.is_cpu() || buffer.storage().use_count() != 1) return;
  spare_buffers.push_back(std::move(buffer));
  if (spare_buffers.size() > kSpareBuffers) {
    auto smallest = std::min_element(
        spare_buffers.begin(), spare_buffers.end(),
        [](const torch::Tensor& a, const torch::Tensor& b) { return a.numel() < b.numel(); });
    spare_buffers.erase(smallest);
  }
}

// cross_kv's sentences `from` (ascending), in place where it can: on the CPU, when nothing else
// holds its memory, each kept sentence moves down to its new row (from[i] >= i, and no row is
// written before it is read) and cross_kv becomes a view of its first rows. Greedy decoding drops
// sentences at most steps; a new tensor each time copied ~1 GB over the 497-line test split and,
// each a little smaller than the last, fragmented the heap (it ended at 254 MB, 217 MB without).
void keep_sentences(torch::Tensor& kv, const std::vector<int64_t>& from,
                    const torch::Tensor& index) {
  if (!kv.defined()) return;
  if (!kv.is_cpu() || !kv.is_contiguous() || kv.storage().use_count() != 1) {
    kv = kv.index_select(0, index);
    return;
  }
  auto* base = static_cast<char*>(kv.data_ptr());
  const int64_t row_bytes = kv.stride(0) * static_cast<int64_t>(kv.element_size());
  for (size_t i = 0; i < from.size(); ++i) {
    const auto row = static_cast<int64_t>(i);
    if (from[i] != row) std::memmove(base + row * row_bytes, base + from[i] * row_bytes, row_bytes);
  }
  kv = kv.narrow(0, 0, static_cast<int64_t>(from.size()));
}

}  // namespace

DecoderState::DecoderState(torch::Tensor pad) : src_pad(std::move(pad)), rows_(src_pad.size(0)) {}

DecoderState::~DecoderState() {
  layers.clear();  // the views, so that a buffer nobody else holds is seen as free
  for (auto& buffer : storage_) spare(std::move(buffer));
}

int64_t DecoderState::capacity() const {
  return layers.empty() || !layers[0].self_kv.defined() ? 0 : layers[0].self_kv.size(1);
}

int64_t DecoderState::allocated_rows() const {
  return layers.empty() || !layers[0].self_kv.defined() ? 0 : layers[0].self_kv.size(0);
}

bool DecoderState::on_cpu() const {
  return layers.empty() || !layers[0].cross_kv.defined() ? src_pad.is_cpu()
                                                         : layers[0].cross_kv.is_cpu();
}

void DecoderState::reallocate(int64_t rows, int64_t steps) {
  const int64_t old_rows = allocated_rows(), old_steps = capacity();
  storage_.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    auto& layer = layers[i];
    const int64_t width = layer.cross_kv.size(2);
    auto buffer = cache_buffer(rows * steps * width, layer.cross_kv.options());
    auto grown = buffer.narrow(0, 0, rows * steps * width).view({rows, steps, width});
    if (layer.self_kv.defined() && step > 0) {
      // Every cache row: on the CPU, live decoder rows may read rows past rows_.
      grown.narrow(0, 0, old_rows).narrow(1, 0, step).copy_(layer.self_kv.narrow(1, 0, step));
    }
    layer.self_kv = grown;
    spare(std::exchange(storage_[i], buffer));
  }
  if (!on_cpu()) return;
  std::vector<int32_t> table(rows * steps);
  for (int64_t r = 0; r < std::min(rows_, old_rows); ++r) {
    std::copy_n(cache_rows_.begin() + r * old_steps, step, table.begin() + r * steps);
  }
  cache_rows_ = std::move(table);
}

void DecoderState::reserve(int64_t rows, int64_t steps) {
  if (allocated_rows() >= rows && capacity() >= steps) return;
  reallocate(std::max(rows, allocated_rows()), std::max(steps, capacity()));
}

SelfCache DecoderState::self_cache(size_t layer) {
  if (allocated_rows() < rows_ || capacity() <= step) {
    reallocate(std::max(rows_, allocated_rows()),
               std::max({step + 1, 2 * capacity(), kFirstCapacity}));
  }
  // Off the CPU, cache row r is decoder row r: rows past rows_ are what select() dropped (finished
  // sentences), which attention must not see.
  const auto& kv = layers.at(layer).self_kv;
  SelfCache cache{on_cpu() ? kv : kv.narrow(0, 0, rows_), torch::Tensor()};
  if (on_cpu()) {
    const int64_t steps = capacity();
    for (int64_t r = 0; r < rows_; ++r) cache_rows_[r * steps + step] = static_cast<int32_t>(r);
    cache.rows = torch::from_blob(cache_rows_.data(), {rows_, steps}, torch::kInt);
  }
  return cache;
}

void DecoderState::select(const std::vector<int64_t>& rows, int64_t width) {
  const auto count = static_cast<int64_t>(rows.size());
  if (width < 1 || count % width != 0) {
    throw std::invalid_argument("DecoderState::select: " + std::to_string(count) +
                                " rows are not sentences of width " + std::to_string(width));
  }
  // The current sentence each new one comes from; they keep their order.
  std::vector<int64_t> from(count / width);
  bool same_sentences = static_cast<int64_t>(from.size()) == sentences();
  bool same_rows = count == rows_ && width == width_;
  for (int64_t i = 0; i < count; ++i) {
    if (rows[i] < 0 || rows[i] >= rows_)
      throw std::out_of_range(row_text(rows[i]) + " of " + std::to_string(rows_));
    const int64_t group = i / width, sentence = rows[i] / width_;
    if (i % width == 0) {
      if (group > 0 && sentence <= from[group - 1]) {
        throw std::invalid_argument(row_text(rows[i]) + ": sentences must keep their order");
      }
      from[group] = sentence;
    } else if (sentence != from[group]) {
      throw std::invalid_argument(row_text(rows[i]) +
                                  ": one sentence's rows come from one sentence");
    }
    same_sentences = same_sentences && from[group] == group;
    same_rows = same_rows && rows[i] == i;
  }
  if (same_rows) return;
  if (!same_sentences) {
    auto index = torch::tensor(from, torch::kLong).to(src_pad.device());
    src_pad = src_pad.index_select(0, index);
    for (auto& layer : layers) keep_sentences(layer.cross_kv, from, index);
  }
  if (step > 0 && capacity() > 0) {
    if (count > allocated_rows()) reallocate(count, capacity());
    if (on_cpu()) {
      const int64_t steps = capacity();
      std::vector<int32_t> table(cache_rows_.size());
      for (int64_t i = 0; i < count; ++i) {
        std::copy_n(cache_rows_.begin() + rows[i] * steps, step, table.begin() + i * steps);
      }
      cache_rows_ = std::move(table);
    } else {
      move_rows(rows);
    }
  }
  rows_ = count;
  width_ = width;
}

void DecoderState::move_rows(const std::vector<int64_t>& rows) {
  const auto count = static_cast<int64_t>(rows.size());
  auto index = torch::tensor(rows, torch::kLong).to(layers[0].self_kv.device());
  storage_.clear();  // the caches move to new tensors of their own
  for (auto& layer : layers) {
    auto moved = torch::empty({allocated_rows(), capacity(), layer.self_kv.size(2)},
                              layer.self_kv.options());
    moved.narrow(0, 0, count)
        .narrow(1, 0, step)
        .copy_(layer.self_kv.narrow(1, 0, step).index_select(0, index));
    layer.self_kv = moved;
  }
}

}  // namespace tandem::model
