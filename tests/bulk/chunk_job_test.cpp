// ChunkJob across the ranks of an mpirun job (np 1 and 2), with a stand-in for translation (each
// line upper-cased and numbered by its index in the input): the output is every chunk's text in
// input order whichever rank did it, each chunk done once; a job resumed from parts on disk does
// only the chunks that are missing, and counts the ones that were in hand as redone.
#include "trainer/bulk/chunk_job.h"

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/mpi_test.h"
#include "trainer/bulk/chunk_store.h"
#include "trainer/common/temp_dir.h"

namespace tandem::bulk {
namespace {

using test::process_group;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// "<index>:<LINE>\n" for each line of the chunk: what the stand-in makes of it.
std::string stand_in(const Chunk& chunk) {
  std::string text;
  for (size_t i = 0; i < chunk.columns[0].size(); ++i) {
    std::string line = chunk.columns[0][i];
    for (char& c : line) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    text += std::to_string(chunk.first_line + static_cast<int64_t>(i)) + ":" + line + "\n";
  }
  return text;
}

// The stand-in's output of the whole input, computed line by line here.
std::string expected_output(int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) text += std::to_string(i) + ":LINE " + std::to_string(i) + "\n";
  return text;
}

// A folder on rank 0, its path known to every rank.
class SharedDir {
 public:
  SharedDir() {
    auto& comm = process_group().cpu();
    if (comm.rank() == 0) dir_ = std::make_unique<TempDir>("chunk-job");
    path_ = comm.broadcast_bytes(comm.rank() == 0 ? dir_->path() : "", 0);
  }
  ~SharedDir() { process_group().cpu().barrier(); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::unique_ptr<TempDir> dir_;
  std::string path_;
};

// Rank 0's files for an input of `lines` lines "line <i>" cut into chunks of `per` lines.
JobFiles job_files(const SharedDir& dir, int lines, int64_t per) {
  JobFiles files;
  if (process_group().rank() != 0) return files;
  std::ofstream input(dir.file("in.txt"));
  for (int i = 0; i < lines; ++i) input << "line " << i << "\n";
  input.close();
  files.inputs = {index_lines(dir.file("in.txt"), per, "--input")};
  files.output = dir.file("out.txt");
  files.record.tool = "test";
  files.record.inputs = {input_identity(files.inputs[0])};
  files.record.chunk_lines = per;
  return files;
}

// The job run with the stand-in; `count` is the chunks this rank did.
JobOutcome run_job(const JobFiles& files, int64_t& count) {
  ChunkJob job(process_group(), "test", 1000);
  return job.run(files, [&count] {
    return [&count](const Chunk& chunk) {
      ++count;
      return stand_in(chunk);
    };
  });
}

TEST(ChunkJob, EveryChunkIsDoneOnceAndTheOutputIsInInputOrder) {
  const SharedDir dir;
  const JobFiles files = job_files(dir, 23, 4);
  int64_t count = 0;
  const JobOutcome outcome = run_job(files, count);
  auto& comm = process_group().cpu();
  EXPECT_EQ(comm.all_reduce_sum(static_cast<double>(count)), 6.0);
  if (comm.rank() != 0) return;
  EXPECT_TRUE(outcome.complete);
  EXPECT_EQ(outcome.chunks, 6);
  EXPECT_EQ(read(files.output), expected_output(23));
  const auto record = nlohmann::json::parse(read(record_path(files.output)));
  EXPECT_EQ(record["summary"]["lines"], 23);
  EXPECT_EQ(record["summary"]["ranks"], comm.size());
}

TEST(ChunkJob, AResumedJobDoesOnlyTheMissingChunks) {
  const SharedDir dir;
  JobFiles files = job_files(dir, 40, 5);  // 8 chunks
  auto& comm = process_group().cpu();
  if (comm.rank() == 0) {
    // A run that stopped with chunks 1, 3 and 4 written, 5 and 6 in hand.
    ChunkStore store(files.output, files.record, OutputState::kNew, 8);
    for (const int64_t c : {1, 3, 4}) {
      Chunk chunk{c, c * 5, {read_chunk(files.inputs[0], c)}};
      store.write(c, stand_in(chunk));
    }
    store.set_in_flight({5, 6});
    files.state = inspect_output(files.output, files.record);
  }
  int64_t count = 0;
  const JobOutcome outcome = run_job(files, count);
  EXPECT_EQ(comm.all_reduce_sum(static_cast<double>(count)), 5.0);
  if (comm.rank() != 0) return;
  EXPECT_TRUE(outcome.complete);
  EXPECT_EQ(read(files.output), expected_output(40));
  const auto record = nlohmann::json::parse(read(record_path(files.output)));
  EXPECT_EQ(record["summary"]["chunks_before"], 3);
  EXPECT_EQ(record["summary"]["chunks_this_run"], 5);
  EXPECT_EQ(record["summary"]["redone"], 2);
}

TEST(ChunkJob, AnEmptyInputGivesAnEmptyOutput) {
  const SharedDir dir;
  const JobFiles files = job_files(dir, 0, 5);
  int64_t count = 0;
  const JobOutcome outcome = run_job(files, count);
  if (process_group().rank() != 0) return;
  EXPECT_TRUE(outcome.complete);
  EXPECT_EQ(outcome.chunks, 0);
  EXPECT_EQ(read(files.output), "");
}

}  // namespace
}  // namespace tandem::bulk
