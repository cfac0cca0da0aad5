// index_lines against a naive split of the same bytes: chunk boundaries, a last line with and
// without its newline, empty lines, CRLF, a chunk per line and one chunk for all; the hashes tell
// contents apart; a file changed under the index is caught at the chunk that changed; a missing
// file or a folder is exit-2 input naming the flag.
#include "trainer/bulk/line_chunks.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "trainer/common/temp_dir.h"

namespace tandem::bulk {
namespace {

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The lines of `bytes` as std::getline reads them, a '\r' before each '\n' dropped.
std::vector<std::string> naive_lines(const std::string& bytes) {
  std::vector<std::string> lines;
  std::string line;
  for (const char c : bytes) {
    if (c != '\n') {
      line += c;
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
    line.clear();
  }
  if (!line.empty()) {
    if (line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> all_chunks(const LineChunks& file) {
  std::vector<std::string> lines;
  for (int64_t c = 0; c < file.count(); ++c) {
    const auto chunk = read_chunk(file, c);
    EXPECT_EQ(static_cast<int64_t>(chunk.size()), file.lines_in(c)) << "chunk " << c;
    lines.insert(lines.end(), chunk.begin(), chunk.end());
  }
  return lines;
}

TEST(LineChunks, ChunksHoldTheLinesOfANaiveSplitInOrder) {
  const TempDir dir("chunks");
  const std::vector<std::string> contents = {"",
                                             "\n",
                                             "a",
                                             "a\n",
                                             "a\nb",
                                             "a\nb\n",
                                             "one\n\n\nfour\nfive\nsix\nseven",
                                             "crlf\r\nline two\r\nlast\r\n",
                                             "x\ny\nz\nw\nv\nu\nt\ns\n"};
  for (const auto& bytes : contents) {
    write(dir.file("in.txt"), bytes);
    const auto expected = naive_lines(bytes);
    for (const int64_t per : {1, 2, 3, 1000}) {
      const auto file = index_lines(dir.file("in.txt"), per, "--input");
      EXPECT_EQ(file.lines, static_cast<int64_t>(expected.size())) << bytes << " per " << per;
      EXPECT_EQ(file.count(), (file.lines + per - 1) / per) << bytes << " per " << per;
      EXPECT_EQ(file.bytes, bytes.size());
      EXPECT_EQ(all_chunks(file), expected) << bytes << " per " << per;
      for (int64_t c = 0; c < file.count(); ++c) EXPECT_EQ(file.first_line(c), c * per);
    }
  }
}

TEST(LineChunks, ALargeFileIsCutAtEveryChunkLinesAcrossReadBlocks) {
  const TempDir dir("chunks-large");
  std::string bytes;
  for (int i = 0; i < 300000; ++i) bytes += "line " + std::to_string(i) + "\n";  // > 1 MiB
  write(dir.file("big.txt"), bytes);
  const auto file = index_lines(dir.file("big.txt"), 7001, "--input");
  EXPECT_EQ(file.lines, 300000);
  EXPECT_EQ(file.count(), 43);
  const auto chunk = read_chunk(file, 20);
  ASSERT_EQ(chunk.size(), 7001u);
  EXPECT_EQ(chunk.front(), "line 140020");
  EXPECT_EQ(chunk.back(), "line 147020");
  EXPECT_EQ(read_chunk(file, 42).size(), 300000u - 42 * 7001);
}

TEST(LineChunks, TheHashesTellContentsApart) {
  const TempDir dir("chunks-hash");
  write(dir.file("a"), "one\ntwo\n");
  write(dir.file("b"), "one\ntwo\n");
  write(dir.file("c"), "one\ntwO\n");
  const auto a = index_lines(dir.file("a"), 1, "--input");
  const auto b = index_lines(dir.file("b"), 1, "--input");
  const auto c = index_lines(dir.file("c"), 1, "--input");
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_NE(a.hash, c.hash);
  EXPECT_EQ(a.chunks[0].hash, c.chunks[0].hash);
  EXPECT_NE(a.chunks[1].hash, c.chunks[1].hash);
  // The same bytes hash alike however they are chunked.
  EXPECT_EQ(index_lines(dir.file("a"), 5, "--input").hash, a.hash);
}

TEST(LineChunks, AFileChangedUnderTheIndexIsCaughtAtItsChunk) {
  const TempDir dir("chunks-changed");
  write(dir.file("in"), "aaa\nbbb\nccc\n");
  const auto file = index_lines(dir.file("in"), 1, "--input");
  write(dir.file("in"), "aaa\nbXb\nccc\n");
  EXPECT_EQ(read_chunk(file, 0), std::vector<std::string>{"aaa"});
  try {
    read_chunk(file, 1);
    FAIL() << "a changed chunk was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("changed while the job ran (other bytes in chunk 1)"),
              std::string::npos)
        << e.what();
  }
  write(dir.file("in"), "aaa\n");
  EXPECT_THROW(read_chunk(file, 2), std::runtime_error);
}

TEST(LineChunks, AMissingFileOrAFolderIsBadInputNamingTheFlag) {
  const TempDir dir("chunks-bad");
  try {
    index_lines(dir.file("absent"), 10, "--input");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--input"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.file("absent")), std::string::npos) << e.what();
  }
  EXPECT_THROW(index_lines(dir.path(), 10, "--src"), std::invalid_argument);
  write(dir.file("in"), "x\n");
  EXPECT_THROW(index_lines(dir.file("in"), 0, "--input"), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::bulk
