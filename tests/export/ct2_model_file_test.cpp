#include "trainer/export/ct2_model_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trainer/common/temp_dir.h"

namespace tandem::exporter {
namespace {

// A reader written from the format's description (CTranslate2's ModelSpec._serialize), field by
// field, independent of the writer.
class Reader {
 public:
  explicit Reader(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
  }
  template <class T>
  T get() {
    T value;
    EXPECT_LE(at_ + sizeof value, bytes_.size());
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  std::string get_string() {
    const auto length = get<uint16_t>();  // with the NUL
    std::string text(bytes_.data() + at_, length - 1);
    EXPECT_EQ(bytes_[at_ + length - 1], '\0');
    at_ += length;
    return text;
  }
  std::vector<char> get_bytes(size_t n) {
    std::vector<char> out(bytes_.begin() + at_, bytes_.begin() + at_ + n);
    at_ += n;
    return out;
  }
  bool at_end() const { return at_ == bytes_.size(); }

 private:
  std::vector<char> bytes_;
  size_t at_ = 0;
};

struct ReadVariable {
  std::string name;
  std::vector<uint32_t> shape;
  uint8_t type = 255;
  std::vector<char> data;
};

ReadVariable read_variable(Reader& r) {
  ReadVariable v;
  v.name = r.get_string();
  const auto rank = r.get<uint8_t>();
  for (int i = 0; i < rank; ++i) v.shape.push_back(r.get<uint32_t>());
  v.type = r.get<uint8_t>();
  v.data = r.get_bytes(r.get<uint32_t>());
  return v;
}

TEST(Ct2ModelFile, WritesHeaderVariablesInNameOrderAndAliases) {
  TempDir dir("ct2-file");
  Ct2Model model;
  model.spec = "TransformerSpec";
  model.revision = 7;
  model.variables.push_back({"z/weight", torch::tensor({1.5f, -2.0f, 0.25f, 4.0f}).view({2, 2})});
  model.variables.push_back({"a/num_heads", torch::scalar_tensor(8, torch::kInt16)});
  model.variables.push_back({"m/flag", torch::scalar_tensor(1, torch::kInt8)});
  model.variables.push_back({"m/half", torch::tensor({1.0f, 2.0f, 3.0f}).to(torch::kHalf)});
  model.aliases.push_back({"y/weight", "z/weight"});
  write_ct2_model(dir.file("model.bin"), model);

  Reader r(dir.file("model.bin"));
  EXPECT_EQ(r.get<uint32_t>(), 6u);  // binary version
  EXPECT_EQ(r.get_string(), "TransformerSpec");
  EXPECT_EQ(r.get<uint32_t>(), 7u);
  ASSERT_EQ(r.get<uint32_t>(), 4u);

  const ReadVariable heads = read_variable(r);
  EXPECT_EQ(heads.name, "a/num_heads");
  EXPECT_TRUE(heads.shape.empty());
  EXPECT_EQ(heads.type, 2);  // int16
  ASSERT_EQ(heads.data.size(), 2u);
  EXPECT_EQ(heads.data[0], 8);
  EXPECT_EQ(heads.data[1], 0);

  const ReadVariable flag = read_variable(r);
  EXPECT_EQ(flag.name, "m/flag");
  EXPECT_EQ(flag.type, 1);  // int8
  EXPECT_EQ(flag.data, std::vector<char>{1});

  const ReadVariable half = read_variable(r);
  EXPECT_EQ(half.name, "m/half");
  EXPECT_EQ(half.shape, std::vector<uint32_t>{3});
  EXPECT_EQ(half.type, 4);  // float16
  ASSERT_EQ(half.data.size(), 6u);
  // IEEE half 2.0 is 0x4000, little-endian.
  EXPECT_EQ(static_cast<uint8_t>(half.data[2]), 0x00);
  EXPECT_EQ(static_cast<uint8_t>(half.data[3]), 0x40);

  const ReadVariable weight = read_variable(r);
  EXPECT_EQ(weight.name, "z/weight");
  EXPECT_EQ(weight.shape, (std::vector<uint32_t>{2, 2}));
  EXPECT_EQ(weight.type, 0);  // float32
  ASSERT_EQ(weight.data.size(), 16u);
  float values[4];
  std::memcpy(values, weight.data.data(), sizeof values);
  EXPECT_EQ(values[0], 1.5f);
  EXPECT_EQ(values[1], -2.0f);
  EXPECT_EQ(values[3], 4.0f);

  ASSERT_EQ(r.get<uint32_t>(), 1u);
  EXPECT_EQ(r.get_string(), "y/weight");
  EXPECT_EQ(r.get_string(), "z/weight");
  EXPECT_TRUE(r.at_end());
}

TEST(Ct2ModelFile, ANonContiguousTensorIsWrittenInRowMajorOrder) {
  TempDir dir("ct2-file");
  const auto transposed = torch::arange(6, torch::kFloat).view({2, 3}).t();  // [3, 2], strided
  write_ct2_model(dir.file("model.bin"), {"S", 1, {{"w", transposed}}, {}});
  Reader r(dir.file("model.bin"));
  r.get<uint32_t>();
  r.get_string();
  r.get<uint32_t>();
  ASSERT_EQ(r.get<uint32_t>(), 1u);
  const ReadVariable w = read_variable(r);
  EXPECT_EQ(w.shape, (std::vector<uint32_t>{3, 2}));
  float values[6];
  std::memcpy(values, w.data.data(), sizeof values);
  const float expected[6] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(values[i], expected[i]) << i;
}

TEST(Ct2ModelFile, ADtypeTheFormatLacksIsRefusedByName) {
  TempDir dir("ct2-file");
  try {
    write_ct2_model(dir.file("model.bin"), {"S", 1, {{"enc/w", torch::zeros({2}, torch::kDouble)}}, {}});
    FAIL() << "float64 written";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("enc/w"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::exporter
