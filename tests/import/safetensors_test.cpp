#include "trainer/import/safetensors.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem::importer {
namespace {

// Writes a safetensors file by hand: the 8-byte little-endian header size, the header, the data.
std::string write_file(const TempDir& dir, const std::string& name, const std::string& header,
                       const std::string& data) {
  const std::string path = dir.file(name);
  std::ofstream out(path, std::ios::binary);
  uint64_t size = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(size >> (8 * i) & 0xff));
  out << header << data;
  return path;
}

std::string bytes_of(const torch::Tensor& t) {
  return std::string(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
}

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
