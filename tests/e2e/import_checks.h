// What the import tests share: copies of a model folder with one thing changed, and the check
// that tandem-import refuses one as it should.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {

// A copy of folder `from` at `to` with `change` applied to it.
inline std::string variant(const std::string& from, const std::string& to,
                           const std::function<void(const std::string&)>& change) {
  std::filesystem::remove_all(to);
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
  change(to);
  return to;
}

// The JSON file at `path`, changed by `change` and written back.
inline void edit_json(const std::string& path,
                      const std::function<void(nlohmann::json&)>& change) {
  auto j = nlohmann::json::parse(read_text(path));
  change(j);
  write_file(path, j.dump());
}

// tandem-import of `dir` exits 2 with one line naming `expected`, and writes nothing at `out`.
inline void expect_refused(const std::string& dir, const std::string& out,
                           const std::string& expected) {
  const auto r = run_command(tool("tandem-import") + " --from " + dir + " --out " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
  EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out)) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp")) << r.output;
}

// The checkpoints at `a` and `b` hold the same model, tensor for tensor and bit for bit, and the
// same vocabulary.
inline void expect_same_model_bitwise(const std::string& a_path, const std::string& b_path) {
  const auto a = checkpoint::load_model_only(a_path);
  const auto b = checkpoint::load_model_only(b_path);
  ASSERT_EQ(a.model.size(), b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    EXPECT_EQ(a.model[i].first, b.model[i].first);
    EXPECT_TRUE(torch::equal(a.model[i].second, b.model[i].second)) << a.model[i].first;
  }
  EXPECT_TRUE(a.vocab == b.vocab);
}

// `written` holds every tensor of `original` under its name, equal, and no other.
inline void expect_same_tensors(const std::map<std::string, torch::Tensor>& original,
                                const std::map<std::string, torch::Tensor>& written) {
  EXPECT_EQ(written.size(), original.size());
  for (const auto& [name, tensor] : original) {
    ASSERT_TRUE(written.count(name)) << name;
    EXPECT_TRUE(torch::equal(written.at(name), tensor)) << name;
  }
}

}  // namespace tandem::test
