#include "trainer/import/safetensors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "tests/import/safetensors_writer.h"
#include "trainer/common/temp_dir.h"

namespace tandem::importer {
namespace {

std::string error_of(const std::string& path) {
  try {
    read_safetensors(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(Safetensors, ReadsEachTensorWithItsDtypeShapeAndBytes) {
  TempDir dir("safetensors");
  const auto a = torch::arange(6, torch::kFloat32).reshape({2, 3}) / 7;
  const auto b = torch::tensor({1.5, -2.25, 3.0}, torch::kFloat16);
  const auto c = torch::tensor({int64_t{1} << 40, int64_t{-3}});
  const std::string data = bytes_of(a) + bytes_of(b) + bytes_of(c);
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("w.a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("w.b":{"dtype":"F16","shape":[3],"data_offsets":[24,30]},)"
      R"("c":{"dtype":"I64","shape":[2],"data_offsets":[30,46]},)"
      R"("empty":{"dtype":"F32","shape":[0,4],"data_offsets":[46,46]}})";
  const auto tensors = read_safetensors(write_file(dir, "m.safetensors", header, data));
  ASSERT_EQ(tensors.size(), 4u);
  EXPECT_TRUE(torch::equal(tensors.at("w.a"), a));
  EXPECT_TRUE(torch::equal(tensors.at("w.b"), b));
  EXPECT_TRUE(torch::equal(tensors.at("c"), c));
  EXPECT_EQ(tensors.at("empty").sizes(), torch::IntArrayRef({0, 4}));
}

// What the streamed import reads: the header at open, then a tensor or some of its rows when asked.
TEST(SafetensorsFile, ReadsRowsOfATensorAsStoredWhenAsked) {
  TempDir dir("safetensors");
  const auto a = torch::arange(24, torch::kFloat32).reshape({6, 4}) / 3;
  const auto b = torch::tensor({1.5, -2.25, 3.0}, torch::kBFloat16);
  const std::string header = R"({"a":{"dtype":"F32","shape":[6,4],"data_offsets":[0,96]},)"
                             R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[96,102]}})";
  const SafetensorsFile file(write_file(dir, "m.safetensors", header, bytes_of(a) + bytes_of(b)));
  ASSERT_EQ(file.entries().size(), 2u);
  EXPECT_EQ(file.entries().at("a").shape, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(file.entries().at("b").dtype, torch::kBFloat16);
  EXPECT_TRUE(torch::equal(file.read_rows("a", 2, 3), a.narrow(0, 2, 3)));
  EXPECT_TRUE(torch::equal(file.read_rows("a", 5, 1), a.narrow(0, 5, 1)));
  EXPECT_EQ(file.read_rows("a", 6, 0).sizes(), torch::IntArrayRef({0, 4}));
  EXPECT_TRUE(torch::equal(file.read("b"), b));
  EXPECT_THROW(file.read_rows("a", 4, 3), std::out_of_range);
  EXPECT_THROW(file.read("c"), std::invalid_argument);
}

TEST(Safetensors, DamagedFilesAreRefusedNamingTheFileAndTensor) {
  TempDir dir("safetensors");
  const std::string good = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data(8, '\0');
  const auto expect = [&](const std::string& path, const std::string& part) {
    const std::string error = error_of(path);
    EXPECT_NE(error.find("'" + path + "'"), std::string::npos) << error;
    EXPECT_NE(error.find(part), std::string::npos) << error;
  };
  expect(dir.file("absent.safetensors"), "cannot open it");
  expect(write_file(dir, "short", good, data.substr(0, 4)), "tensor 'x': data_offsets [0, 8)");
  expect(write_file(dir, "json", "{\"x\": [", data), "its header is not JSON");
  expect(write_file(dir, "list", "[1, 2]", data), "its header is not an object");
  expect(write_file(dir, "dtype", R"({"x":{"dtype":"F8","shape":[2],"data_offsets":[0,8]}})", data),
         "tensor 'x': dtype \"F8\"");
  expect(write_file(dir, "shape", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                    data),
         "for 12 bytes of shape [3]");
  expect(write_file(dir, "order", R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})",
                    data),
         "data_offsets [8, 0)");
  expect(write_file(dir, "fields", R"({"x":{"dtype":"F32"}})", data),
         "expected dtype, shape and data_offsets");
  expect(write_file(dir, "negative", R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                    data),
         "is not a list of sizes");
  // A header size beyond the file.
  {
    const std::string path = dir.file("huge");
    std::ofstream out(path, std::ios::binary);
    out << std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) << good;
    out.close();
    expect(path, "not a safetensors file (header of 4294967295 bytes");
  }
  {
    const std::string path = dir.file("tiny");
    std::ofstream(path, std::ios::binary) << "abc";
    expect(path, "shorter than its 8-byte header size");
  }
}

}  // namespace
}  // namespace tandem::importer
