#include "trainer/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/common/temp_dir.h"

namespace tandem::checkpoint {
namespace {

namespace fs = std::filesystem;

const char* kWeight = "encoder.layers.0.self_attn.q_proj.weight";

// Same dtype, shape and bytes (NaN payloads and -0.0 included, which torch::equal would not check).
void expect_bitwise_equal(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.scalar_type(), b.scalar_type()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const torch::Tensor ca = a.contiguous(), cb = b.contiguous();
  if (ca.nbytes() == 0) return;  // no memory: data_ptr() is null, which memcmp may not take
  EXPECT_EQ(std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()), 0) << what;
}

void expect_same_tensors(const NamedTensors& a, const NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    expect_bitwise_equal(a[i].second, b[i].second, a[i].first);
  }
}

CheckpointData make_data() {
  torch::manual_seed(3);
  CheckpointData d;
  d.step = 500;
  d.world_size = 3;
  torch::Tensor special = torch::tensor({0.0f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                                         std::numeric_limits<float>::infinity(),
                                         std::numeric_limits<float>::denorm_min()});
  d.model = {{kWeight, torch::randn({3, 4})},
             {"encoder.layers.0.self_attn.q_proj.bias", special},
             {"decoder.embed.weight", torch::randn({2, 3}, torch::kFloat64).t()},  // not contiguous
             {"counts", torch::arange(5, torch::kInt64) * int64_t{1000000000000}},
             {"ids", torch::tensor({{-7, 8}, {9, 2147483647}}, torch::kInt32)},
             {"mask", torch::tensor({0, 255, 1}, torch::kUInt8)},
             {"empty", torch::zeros({0, 4})},
             {"scale", torch::tensor(2.5f)}};  // 0-d
  d.ema = {{kWeight, torch::randn({3, 4})}, {"scale", torch::tensor(2.25f)}};
  d.optimizer["exp_avg"] = {{kWeight, torch::randn({3, 4})}, {"counts", torch::ones({5})}};
  d.optimizer["exp_avg_sq"] = {{kWeight, torch::rand({3, 4})}, {"counts", torch::zeros({5})}};
  d.optimizer_step = 17;
  d.schedule = {{"last_lr", 1.0 / 3.0}, {"warmup", 4000.0}};
  d.data_epoch = 3;
  d.data_next_batch = 12345;
  d.rng = {std::string("a\0b\xff\0", 5), "", std::string(300, '\0') + "z"};
  d.config_yaml = "model:\n  d_model: 256\ndata:\n  corpus: \"wörk/c.h5\"\n";
  d.validation = R"({"best_step":4,"history":[{"step":4,"valid_bleu":12.5}]})";
  for (int i = 0; i < 1000; ++i) d.vocab.push_back(static_cast<char>(i % 256));
  return d;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_checkpoint_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    remove_tree(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "ckpt.h5").string();
  }
  void TearDown() override { remove_tree(dir_); }

  // The one-line message of the std::invalid_argument that load() throws.
  std::string load_error(const std::string& path) {
    try {
      load(path);
    } catch (const std::invalid_argument& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_NE(message.find(path), std::string::npos) << message;
      return message;
    }
    ADD_FAILURE() << "load accepted " << path;
    return "";
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(CheckpointTest, RoundTripPreservesEveryFieldBitwise) {
  const CheckpointData saved = make_data();
  save(path_, saved);
  const CheckpointData loaded = load(path_);
  EXPECT_EQ(loaded.step, 500);
  EXPECT_EQ(loaded.world_size, 3);
  expect_same_tensors(saved.model, loaded.model);
  expect_same_tensors(saved.ema, loaded.ema);
  ASSERT_EQ(loaded.optimizer.size(), 2u);
  expect_same_tensors(saved.optimizer.at("exp_avg"), loaded.optimizer.at("exp_avg"));
  expect_same_tensors(saved.optimizer.at("exp_avg_sq"), loaded.optimizer.at("exp_avg_sq"));
  EXPECT_EQ(loaded.optimizer_step, 17);
  EXPECT_EQ(loaded.schedule, saved.schedule);
  EXPECT_EQ(loaded.data_epoch, 3);
  EXPECT_EQ(loaded.data_next_batch, 12345);
  EXPECT_EQ(loaded.rng, saved.rng);
  EXPECT_EQ(loaded.config_yaml, saved.config_yaml);
  EXPECT_EQ(loaded.validation, saved.validation);
  EXPECT_EQ(loaded.vocab, saved.vocab);
  EXPECT_EQ(loaded.model[7].second.dim(), 0);  // the 0-d tensor stays 0-d
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
}

// A save that fetches /ema's and /optimizer's tensors one at a time writes the file the values
// would, asking for each tensor once, in streamed_groups()'s order; the outline reads them back as
// shapes, a GroupReader one at a time.
TEST_F(CheckpointTest, AStreamedSaveWritesWhatTheValuesWouldAndTheOutlineReadsTheirShapes) {
  const CheckpointData values = make_data();
  CheckpointData streamed = make_data();
  const auto placeholders = [](NamedTensors& group) {
    for (auto& [name, t] : group) t = torch::empty(t.sizes(), t.options().device(torch::kMeta));
  };
  placeholders(streamed.ema);
  for (auto& [group, tensors] : streamed.optimizer) placeholders(tensors);
  std::vector<std::string> asked;
  streamed.fetch = [&](const std::string& group, size_t index) {
    asked.push_back(group + "/" + std::to_string(index));
    const NamedTensors& source =
        group == "ema" ? values.ema
                       : values.optimizer.at(group.substr(std::string("optimizer/").size()));
    return source[index].second;
  };
  save(path_, streamed);
  EXPECT_EQ(asked, (std::vector<std::string>{"ema/0", "ema/1", "optimizer/exp_avg/0",
                                             "optimizer/exp_avg/1", "optimizer/exp_avg_sq/0",
                                             "optimizer/exp_avg_sq/1"}));
  const CheckpointData loaded = load(path_);
  expect_same_tensors(values.ema, loaded.ema);
  expect_same_tensors(values.optimizer.at("exp_avg_sq"), loaded.optimizer.at("exp_avg_sq"));

  const CheckpointData outline = load_outline(path_);
  ASSERT_EQ(outline.optimizer.at("exp_avg").size(), 2u);
  EXPECT_TRUE(outline.optimizer.at("exp_avg")[0].second.is_meta());
  EXPECT_EQ(outline.optimizer.at("exp_avg")[0].second.sizes(), torch::IntArrayRef({3, 4}));
  EXPECT_EQ(outline.model.size(), values.model.size());
  EXPECT_EQ(outline.optimizer_step, 17);
  const GroupReader reader(path_, "optimizer/exp_avg");
  expect_bitwise_equal(reader.read(kWeight), values.optimizer.at("exp_avg")[0].second,
                       "GroupReader");
  EXPECT_THROW(reader.read("no.such.tensor"), std::invalid_argument);
  EXPECT_THROW(GroupReader(path_, "optimizer/no_such_group"), std::invalid_argument);

  // A fetched tensor of another shape than announced fails the save, leaving no file.
  streamed.fetch = [&](const std::string&, size_t) { return torch::zeros({7}); };
  const std::string other = (dir_ / "other.h5").string();
  EXPECT_THROW(save(other, streamed), std::runtime_error);
  EXPECT_FALSE(fs::exists(other));
  EXPECT_FALSE(fs::exists(other + ".tmp"));
}

// An import's save: /model's tensors made one at a time as they are written, the rest as given.
TEST_F(CheckpointTest, AModelOfPlaceholdersIsFetchedATensorAtATime) {
  const CheckpointData values = make_data();
  CheckpointData streamed = make_data();
  for (auto& [name, t] : streamed.model) {
    t = torch::empty(t.sizes(), t.options().device(torch::kMeta));
  }
  size_t asked = 0;
  streamed.fetch = [&](const std::string& group, size_t index) {
    EXPECT_EQ(group, "model");
    EXPECT_EQ(index, asked++);
    return values.model[index].second;
  };
  ASSERT_EQ(streamed_groups(streamed).front().first, "model");
  save(path_, streamed);
  EXPECT_EQ(asked, values.model.size());
  const CheckpointData loaded = load(path_);
  expect_same_tensors(values.model, loaded.model);
  expect_same_tensors(values.ema, loaded.ema);
}

TEST_F(CheckpointTest, FillsTorchVersionAndCreationTimeWhenEmpty) {
  save(path_, make_data());
  const CheckpointData loaded = load(path_);
  EXPECT_EQ(loaded.torch_version, TORCH_VERSION);
  EXPECT_TRUE(std::regex_match(
      loaded.created, std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")))
      << loaded.created;
  CheckpointData given = make_data();
  given.torch_version = "9.9.9";
  given.created = "2020-01-02T03:04:05Z";
  save(path_, given);
  EXPECT_EQ(load(path_).torch_version, "9.9.9");
  EXPECT_EQ(load(path_).created, "2020-01-02T03:04:05Z");
}

TEST_F(CheckpointTest, EmptyOptimizerAndStringsRoundTrip) {
  CheckpointData d;
  d.model = {{"w", torch::ones({2})}};
  d.optimizer["exp_avg"] = {};
  save(path_, d);
  const CheckpointData loaded = load(path_);
  ASSERT_EQ(loaded.optimizer.size(), 1u);
  EXPECT_TRUE(loaded.optimizer.at("exp_avg").empty());
  EXPECT_TRUE(loaded.schedule.empty());
  EXPECT_TRUE(loaded.rng.empty());
  EXPECT_TRUE(loaded.ema.empty());  // a run without an average writes no /ema
  EXPECT_EQ(loaded.config_yaml, "");
  EXPECT_EQ(loaded.vocab, "");
  d.optimizer.clear();
  save(path_, d);
  EXPECT_TRUE(load(path_).optimizer.empty());
}

TEST_F(CheckpointTest, LoadModelOnlySkipsTrainingState) {
  const CheckpointData saved = make_data();
  save(path_, saved);
  const CheckpointData loaded = load_model_only(path_);
  expect_same_tensors(saved.model, loaded.model);
  expect_same_tensors(saved.ema, loaded.ema);  // eval and decode use the average
  EXPECT_EQ(loaded.step, 500);
  EXPECT_EQ(loaded.config_yaml, saved.config_yaml);
  EXPECT_EQ(loaded.vocab, saved.vocab);
  EXPECT_TRUE(loaded.optimizer.empty());
  EXPECT_TRUE(loaded.rng.empty());
}

TEST_F(CheckpointTest, DescriptionHasNoTensorsAndReadParametersFillsThemInPlace) {
  const CheckpointData saved = make_data();
  save(path_, saved);
  const CheckpointData described = load_description(path_);
  EXPECT_TRUE(described.model.empty());
  EXPECT_TRUE(described.ema.empty());
  EXPECT_TRUE(described.holds_ema);
  EXPECT_EQ(described.step, 500);
  EXPECT_EQ(described.config_yaml, saved.config_yaml);
  EXPECT_EQ(described.vocab, saved.vocab);
  // Targets shaped like the saved tensors, in another order; one contiguous of the saved type
  // (read in place), one of another type and one not contiguous (read, then copied).
  const auto& [scale_name, scale] = saved.model[7];
  const auto& [weight_name, weight] = saved.model[0];
  const auto& [embed_name, embed] = saved.model[2];
  torch::Tensor scale_target = torch::zeros({});
  torch::Tensor weight_target = torch::zeros({3, 4}, torch::kFloat64);
  torch::Tensor embed_target = torch::zeros({2, 3}, torch::kFloat64).t();  // [3, 2], strided
  const void* in_place = scale_target.data_ptr();
  NamedTensors targets = {{embed_name, embed_target}, {scale_name, scale_target}};
  for (size_t i = 0; i < saved.model.size(); ++i) {
    if (i != 0 && i != 2 && i != 7)
      targets.emplace_back(saved.model[i].first, torch::empty_like(saved.model[i].second));
  }
  targets.emplace_back(weight_name, weight_target);
  read_parameters(path_, "model", targets);
  EXPECT_EQ(scale_target.data_ptr(), in_place);
  expect_bitwise_equal(scale_target, scale, scale_name);
  expect_bitwise_equal(weight_target, weight.to(torch::kFloat64), weight_name);
  expect_bitwise_equal(embed_target, embed, embed_name);
  for (const auto& [name, target] : targets) {
    for (const auto& [saved_name, tensor] : saved.model) {
      if (name == saved_name) expect_bitwise_equal(target, tensor.to(target.scalar_type()), name);
    }
  }
  // The average, into targets of its own.
  NamedTensors averages;
  for (const auto& [name, tensor] : saved.ema)
    averages.emplace_back(name, torch::zeros_like(tensor));
  read_parameters(path_, "ema", averages);
  expect_same_tensors(saved.ema, averages);
}

TEST_F(CheckpointTest, ReadParametersRefusesWhatDoesNotFitAndLeavesTheTargets) {
  save(path_, make_data());
  NamedTensors targets = {{kWeight, torch::zeros({4, 3})}, {"extra", torch::zeros({1})}};
  try {
    read_parameters(path_, "ema", targets);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), ("checkpoint '" + path_ +
                            "' does not fit the model (3 differences): shape of " + kWeight +
                            ": checkpoint [3, 4] vs model [4, 3]; missing in the checkpoint: "
                            "extra; not in the model: scale")
                               .c_str());
  }
  EXPECT_TRUE(torch::equal(targets[0].second, torch::zeros({4, 3})));
  CheckpointData no_average;
  no_average.model = {{"w", torch::ones({2})}};
  save(path_, no_average);
  EXPECT_FALSE(load_description(path_).holds_ema);
  NamedTensors w = {{"w", torch::zeros({2})}};
  try {
    read_parameters(path_, "ema", w);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), ("checkpoint '" + path_ + "': group /ema is missing").c_str());
  }
}

TEST_F(CheckpointTest, DatasetsAreNamedByDottedParameterNamesWithFletcher32) {
  save(path_, make_data());
  const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const std::string name = std::string("/model/") + kWeight;
  ASSERT_GT(H5Lexists(file, "/model", H5P_DEFAULT), 0);
  ASSERT_GT(H5Lexists(file, name.c_str(), H5P_DEFAULT), 0);
  const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  const hid_t dcpl = H5Dget_create_plist(dataset);
  bool has_fletcher32 = false;
  for (int i = 0; i < H5Pget_nfilters(dcpl); ++i) {
    unsigned flags = 0;
    size_t n = 0;
    has_fletcher32 |=
        H5Pget_filter2(dcpl, i, &flags, &n, nullptr, 0, nullptr, nullptr) == H5Z_FILTER_FLETCHER32;
  }
  EXPECT_TRUE(has_fletcher32);
  H5Pclose(dcpl);
  H5Dclose(dataset);
  H5Fclose(file);
}

TEST_F(CheckpointTest, MissingFileIsNamed) {
  EXPECT_NE(load_error(path_).find("cannot open (No such file or directory)"), std::string::npos);
}

TEST_F(CheckpointTest, NonHdf5FileIsNamed) {
  std::ofstream(path_) << "model: not a checkpoint\n";
  EXPECT_NE(load_error(path_).find("not an HDF5 file"), std::string::npos);
}

TEST_F(CheckpointTest, Hdf5FileWithoutFormatAttributeIsNotACheckpoint) {
  const hid_t file = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  H5Gclose(H5Gcreate2(file, "model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  H5Fclose(file);
  EXPECT_NE(load_error(path_).find("not a Tandem checkpoint"), std::string::npos);
}

TEST_F(CheckpointTest, NewerFormatVersionIsRejected) {
  save(path_, make_data());
  const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t attribute = H5Aopen(file, "format_version", H5P_DEFAULT);
  const int64_t version = 99;
  ASSERT_GE(H5Awrite(attribute, H5T_NATIVE_INT64, &version), 0);
  H5Aclose(attribute);
  H5Fclose(file);
  EXPECT_NE(load_error(path_).find("format_version 99 is not supported"), std::string::npos);
}

TEST_F(CheckpointTest, TruncatedFileIsNamed) {
  save(path_, make_data());
  const auto size = fs::file_size(path_);
  fs::resize_file(path_, size / 2);
  EXPECT_NE(load_error(path_).find("the file is truncated: " + std::to_string(size / 2) + " of " +
                                   std::to_string(size) + " bytes"),
            std::string::npos);
}

TEST_F(CheckpointTest, MissingDatasetIsNamed) {
  save(path_, make_data());
  const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Ldelete(file, "/vocab", H5P_DEFAULT), 0);
  H5Fclose(file);
  EXPECT_NE(load_error(path_).find("dataset /vocab is missing"), std::string::npos);
}

// A few bytes can declare a dataset of 2^36 floats whose chunks were never written; reading it would
// allocate 256 GiB (an edit the fuzz targets make; seen in review, not as a report). Refused first.
TEST_F(CheckpointTest, ADatasetDeclaringFarMoreThanTheFileStoresIsRefused) {
  save(path_, make_data());
  const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Ldelete(file, "/model/counts", H5P_DEFAULT), 0);
  const hsize_t dims[2] = {hsize_t{1} << 18, hsize_t{1} << 18};
  const hsize_t chunk[2] = {64, 64};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const hid_t create = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(create, 2, chunk);
  const hid_t dataset = H5Dcreate2(file, "/model/counts", H5T_IEEE_F32LE, space, H5P_DEFAULT,
                                   create, H5P_DEFAULT);
  ASSERT_GE(dataset, 0);
  H5Dclose(dataset);
  H5Pclose(create);
  H5Sclose(space);
  H5Fclose(file);
  EXPECT_NE(load_error(path_).find("dataset /model/counts: it declares 274877906944 bytes of data "
                                   "but the file stores 0 (damaged or crafted)"),
            std::string::npos);
  EXPECT_THROW(stored_elements(path_, "model"), std::invalid_argument);
}

// A 0-d tensor is one element with the attribute scalar = 1; with more elements, reading them into
// the one would write past it.
TEST_F(CheckpointTest, AScalarDatasetOfMoreThanOneElementIsRefused) {
  save(path_, make_data());
  const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t dataset = H5Dopen2(file, "/model/mask", H5P_DEFAULT);  // 3 elements
  const int64_t one = 1;
  const hid_t scalar_space = H5Screate(H5S_SCALAR);
  const hid_t attribute = H5Acreate2(dataset, "scalar", H5T_STD_I64LE, scalar_space, H5P_DEFAULT,
                                     H5P_DEFAULT);
  ASSERT_GE(H5Awrite(attribute, H5T_NATIVE_INT64, &one), 0);
  H5Aclose(attribute);
  H5Sclose(scalar_space);
  H5Dclose(dataset);
  H5Fclose(file);
  EXPECT_NE(load_error(path_).find("dataset /model/mask is marked scalar but holds 3 elements"),
            std::string::npos);
}

TEST_F(CheckpointTest, StoredElementsCountsEveryValueOfTheGroup) {
  const CheckpointData data = make_data();
  save(path_, data);
  int64_t model = 0;
  for (const auto& [name, tensor] : data.model) model += tensor.numel();
  EXPECT_EQ(stored_elements(path_, "model"), model);  // 12 + 5 + 6 + 5 + 4 + 3 + 0 + 1
  EXPECT_EQ(stored_elements(path_, "ema"), 13);
}

// Flips one byte of a parameter's raw data in place; Fletcher32 must catch it on read.
TEST_F(CheckpointTest, FlippedByteInParameterFailsItsChecksum) {
  save(path_, make_data());
  const std::string name = std::string("/model/") + kWeight;
  haddr_t address = HADDR_UNDEF;
  {
    const hid_t file = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    const hid_t space = H5Dget_space(dataset);  // 1.10 rejects H5S_ALL here
    hsize_t chunks = 0;
    ASSERT_GE(H5Dget_num_chunks(dataset, space, &chunks), 0);
    ASSERT_EQ(chunks, 1u);  // a small tensor is one chunk
    hsize_t offset[2];
    unsigned filter_mask = 0;
    hsize_t size = 0;
    ASSERT_GE(H5Dget_chunk_info(dataset, space, 0, offset, &filter_mask, &address, &size), 0);
    EXPECT_EQ(size, 3 * 4 * sizeof(float) + 4);  // the data and its 4-byte checksum
    H5Sclose(space);
    H5Dclose(dataset);
    H5Fclose(file);
  }
  {
    std::fstream file(path_, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(static_cast<std::streamoff>(address) + 5);
    char byte = 0;
    file.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    file.seekp(static_cast<std::streamoff>(address) + 5);
    file.write(&byte, 1);
  }
  const std::string error = load_error(path_);
  EXPECT_NE(error.find(name), std::string::npos) << error;
  EXPECT_NE(error.find("checksum"), std::string::npos) << error;
}

TEST_F(CheckpointTest, FailedSaveLeavesThePreviousFileIntact) {
  const CheckpointData good = make_data();
  save(path_, good);
  CheckpointData bad = make_data();
  bad.model.emplace_back("half", torch::ones({2}, torch::kFloat16));  // no HDF5 mapping
  try {
    save(path_, bad);
    FAIL() << "saved an unsupported dtype";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path_), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unsupported dtype"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
  expect_same_tensors(good.model, load(path_).model);
}

TEST_F(CheckpointTest, SaveIntoMissingDirectoryFails) {
  const std::string path = (dir_ / "absent" / "ckpt.h5").string();
  EXPECT_THROW(save(path, make_data()), std::runtime_error);
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(CheckpointTest, SaveReplacesStaleTmpAndExistingFile) {
  std::ofstream(path_ + ".tmp") << "left over by a crash";
  CheckpointData d = make_data();
  save(path_, d);
  d.step = 600;
  save(path_, d);
  EXPECT_EQ(load(path_).step, 600);
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
}

TEST(CheckCompatible, AcceptsSameNamesAndShapesInAnyOrder) {
  const NamedTensors a = {{"x", torch::zeros({2, 3})}, {"y", torch::zeros({4})}};
  const NamedTensors b = {{"y", torch::ones({4})}, {"x", torch::ones({2, 3}, torch::kFloat64)}};
  EXPECT_NO_THROW(check_compatible("c.h5", a, b));
}

TEST(CheckCompatible, ListsMissingUnexpectedAndMisshapedTensors) {
  const NamedTensors checkpoint = {{"x", torch::zeros({2, 3})}, {"old", torch::zeros({1})}};
  const NamedTensors model = {{"x", torch::zeros({3, 2})}, {"new", torch::zeros({1})}};
  try {
    check_compatible("c.h5", checkpoint, model);
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "checkpoint 'c.h5' does not fit the model (3 differences): shape of x: "
                 "checkpoint [2, 3] vs model [3, 2]; missing in the checkpoint: new; "
                 "not in the model: old");
  }
}

}  // namespace
}  // namespace tandem::checkpoint
