// The parts of a chunked job's output on disk: a new job makes its parts folder and record; the
// same job resumes with its parts (left-over temporary files gone) and learns which chunks were in
// hand when it stopped; the output appears whole, equal to its parts in order, with its record,
// and the folder goes; a rerun of the same job finds it complete. What another command left is
// refused, naming what differs, with nothing on disk changed.
#include "trainer/bulk/chunk_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem::bulk {
namespace {

bool exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

JobRecord a_job() {
  JobRecord job;
  job.tool = "tandem-decode";
  job.inputs = {{"mono.es", 10, 120, 0x1234}};
  job.models = {{"m.h5", 600, "2026-12-01T10:00:00Z", 5000}};
  job.options = {{"--beam", "4"}, {"--lenpen", "0.6"}};
  job.chunk_lines = 4;
  return job;
}

// The message of the std::invalid_argument `action` throws ("" when it throws none).
template <typename Action>
std::string refusal(Action action) {
  try {
    action();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(JobRecord, DifferenceNamesWhatDiffers) {
  const JobRecord job = a_job();
  EXPECT_EQ(difference(job, job), "");
  JobRecord moved = job;  // the same content elsewhere is the same job
  moved.inputs[0].path = "elsewhere/mono.es";
  moved.models[0].path = "copy.h5";
  EXPECT_EQ(difference(job, moved), "");
  JobRecord other = job;
  other.options[0].second = "1";
  EXPECT_EQ(difference(job, other), "--beam 1 (recorded: 4)");
  other = job;
  other.options.emplace_back("--sampling", "topk:10");
  EXPECT_EQ(difference(job, other), "--sampling topk:10 (recorded: not given)");
  EXPECT_EQ(difference(other, job), "--sampling not given (recorded: topk:10)");
  other = job;
  other.inputs[0].hash = 0x4321;
  EXPECT_EQ(difference(job, other),
            "the input 'mono.es' has other content than the recorded 'mono.es' (recorded: 10 "
            "lines, 120 bytes; now 10 lines, 120 bytes, other bytes)");
  other = job;
  other.models[0].step = 800;
  EXPECT_NE(difference(job, other).find("the checkpoint 'm.h5' is not the recorded"),
            std::string::npos);
  other = job;
  other.chunk_lines = 8;
  EXPECT_EQ(difference(job, other), "--chunk-lines 8 (recorded: 4)");
  other = job;
  other.tool = "tandem-score";
  EXPECT_EQ(difference(job, other), "it is tandem-decode's output");
  // And through JSON unchanged.
  EXPECT_EQ(difference(JobRecord::from_json(job.to_json(), "x"), job), "");
  EXPECT_THROW(JobRecord::from_json(nlohmann::json{{"tool", 3}}, "x"), std::invalid_argument);
}

TEST(ChunkStore, AJobResumesWithItsPartsAndEndsInTheWholeOutput) {
  const TempDir dir("store");
  const std::string output = dir.file("out.txt");
  const JobRecord job = a_job();
  EXPECT_EQ(inspect_output(output, job), OutputState::kNew);
  {
    ChunkStore store(output, job, inspect_output(output, job), 3);
    EXPECT_EQ(store.done_count(), 0);
    EXPECT_TRUE(exists(parts_folder(output) + "/job.json"));
    store.write(1, "b1\nb2\n");
    store.set_in_flight({0, 2});
  }
  EXPECT_EQ(inspect_output(output, job), OutputState::kResumable);
  EXPECT_EQ(chunks_done(output, 3), 1);
  std::ofstream(parts_folder(output) + "/00000000.part.tmp") << "half a part";
  {
    ChunkStore store(output, job, inspect_output(output, job), 3);
    EXPECT_EQ(store.done_count(), 1);
    EXPECT_TRUE(store.done(1));
    EXPECT_FALSE(store.done(0));
    EXPECT_EQ(store.redone(), (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(store.redone_total(), 2);
    EXPECT_FALSE(exists(parts_folder(output) + "/00000000.part.tmp"));
    store.write(0, "a1\n");
    store.set_in_flight({2});
  }
  ChunkStore store(output, job, inspect_output(output, job), 3);
  EXPECT_EQ(store.redone(), (std::vector<int64_t>{2}));
  EXPECT_EQ(store.redone_total(), 3);
  store.write(2, "");
  store.complete({{"lines", 3}});
  EXPECT_EQ(read(output), "a1\nb1\nb2\n");
  EXPECT_FALSE(exists(parts_folder(output)));
  const auto record = nlohmann::json::parse(read(record_path(output)));
  EXPECT_EQ(record["summary"]["lines"], 3);
  EXPECT_EQ(difference(JobRecord::from_json(record, "r"), job), "");
  EXPECT_EQ(inspect_output(output, job), OutputState::kComplete);
  EXPECT_EQ(chunks_done(output, 3), 3);
}

TEST(ChunkStore, WhatAnotherCommandLeftIsRefusedAndKept) {
  const TempDir dir("store-refused");
  const std::string output = dir.file("out.txt");
  const JobRecord job = a_job();
  JobRecord other = job;
  other.options[0].second = "1";

  std::ofstream(output) << "someone's file\n";
  EXPECT_NE(refusal([&] { inspect_output(output, job); })
                .find("--output '" + output + "' exists and no " + output +
                      ".job.json says it is this command's output"),
            std::string::npos);
  EXPECT_NE(refusal([&] { ChunkStore store(output, job, inspect_output(output, job), 3); }), "");
  EXPECT_EQ(read(output), "someone's file\n");
  EXPECT_FALSE(exists(parts_folder(output)));

  std::remove(output.c_str());
  {
    ChunkStore store(output, job, inspect_output(output, job), 1);
    store.write(0, "x\n");
    store.complete({});
  }
  EXPECT_NE(refusal([&] {
              inspect_output(output, other);
            }).find("exists from a different command: --beam 1 (recorded: 4)"),
            std::string::npos);
  EXPECT_EQ(read(output), "x\n");

  const std::string second = dir.file("second.txt");
  {
    ChunkStore store(second, job, inspect_output(second, job), 3);
    store.write(2, "z\n");
  }
  const std::string why =
      refusal([&] { ChunkStore store(second, other, inspect_output(second, other), 3); });
  EXPECT_NE(why.find("the resume record '" + parts_folder(second) +
                     "/job.json' does not match this command: --beam 1 (recorded: 4)"),
            std::string::npos)
      << why;
  EXPECT_EQ(read(parts_folder(second) + "/00000002.part"), "z\n");
  EXPECT_NE(refusal([&] {
              ChunkStore store(second, job, inspect_output(second, job), 2);
            }).find("past the job's last chunk"),
            std::string::npos);

  const std::string third = dir.file("third.txt");
  ASSERT_EQ(mkdir(parts_folder(third).c_str(), 0755), 0);
  std::ofstream(parts_folder(third) + "/00000001.part") << "stray\n";
  EXPECT_NE(refusal([&] { inspect_output(third, job); }).find("holds parts but no job.json"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem::bulk
