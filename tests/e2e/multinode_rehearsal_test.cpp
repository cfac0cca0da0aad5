// Multi-node rehearsal: two network namespaces with their own hostnames play two hosts joined by
// TCP (launch/netns-rehearsal.sh); tandem-train with one rank on each must run there and agree
// with the same config run as mpirun -np 2 on one node, and tandem-decode --hostfile of a file
// across both must write the bytes of one rank on one machine. Skipped, with the reason, where
// the machine forbids namespaces (not root, no iproute2).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"

namespace tandem::test {
namespace {

const std::string kLauncher = std::string(TANDEM_LAUNCH_DIR) + "/netns-rehearsal.sh";
const std::string kCarried = "link nodeA-nodeB carried ";

std::vector<nlohmann::json> metrics(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

class MultiNodeRehearsal : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto check = run_command(kLauncher + " --check");
    if (check.exit_code == 77) GTEST_SKIP() << check.output;
    ASSERT_EQ(check.exit_code, 0) << check.output;
    dir_ = std::make_unique<TempDir>("netns");
    const std::string corpus = make_reverse_corpus(dir_->path());
    // Dropout on, so that agreement needs each rank's RNG stream to be the one-node run's too.
    config_ = dir_->file("config.yaml");
    const std::string model =
        "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64, "
        "dropout: 0.1}\n";
    write_file(config_, model + "data: {corpus: " + corpus + ", max_tokens: 128, seed: 3}\n" +
                            "train: {max_steps: 6, lr: 0.003, seed: 5, threads: 1}\n"
                            "checkpoint: {every_steps: 0, keep_last: 1}\n"
                            "dist: {check_every_steps: 2}\n"
                            "log: {every_steps: 1}\n");
  }
  std::string train(const std::string& launch, const std::string& run) const {
    return launch + tool("tandem-train") + " --config " + config_ +
           " --set checkpoint.dir=" + dir_->file(run);
  }
  std::unique_ptr<TempDir> dir_;
  std::string config_;
};

TEST_F(MultiNodeRehearsal, RanksOnTwoHostsTrainExactlyAsOnOneNode) {
  const auto two_nodes =
      run_command("MPIRUN=" + std::string(TANDEM_MPIEXEC_PATH) + " " + kLauncher +
                  " -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 -- " + train("", "two-nodes"));
  ASSERT_EQ(two_nodes.exit_code, 0) << two_nodes.output;
  // Each rank says where it runs before it starts training; rank 0's banner names its host too.
  EXPECT_NE(two_nodes.output.find("rank 0 of 2 on host nodeA"), std::string::npos)
      << two_nodes.output;
  EXPECT_NE(two_nodes.output.find("rank 1 of 2 on host nodeB"), std::string::npos)
      << two_nodes.output;
  EXPECT_NE(two_nodes.output.find("2 rank(s)"), std::string::npos) << two_nodes.output;
  EXPECT_NE(two_nodes.output.find(", host nodeA"), std::string::npos) << two_nodes.output;
  // The traffic crossed the veth link: rank 0's initial parameters alone (~25k fp32 values)
  // are ~100 KB from nodeA to nodeB.
  const std::string carried = kCarried;
  const size_t at = two_nodes.output.find(carried);
  ASSERT_NE(at, std::string::npos) << two_nodes.output;
  EXPECT_GT(std::stoll(two_nodes.output.substr(at + carried.size())), 50000) << two_nodes.output;

  const auto one_node = run_command(train(mpirun(2), "one-node"));
  ASSERT_EQ(one_node.exit_code, 0) << one_node.output;

  // Two operands summed in either order give the same bits, so the reduction over TCP between
  // "hosts" must reproduce the shared-memory run exactly: every step's loss...
  const auto expected = metrics(dir_->file("one-node"));
  const auto rehearsed = metrics(dir_->file("two-nodes"));
  ASSERT_EQ(expected.size(), 6u);
  ASSERT_EQ(rehearsed.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(rehearsed[i]["step"], expected[i]["step"]);
    EXPECT_EQ(rehearsed[i]["loss"].get<double>(), expected[i]["loss"].get<double>())
        << "step " << i + 1;
  }
  // ...and the final parameters, compared by h5diff (exit 0: no differing element).
  const auto diff = run_command("h5diff " + dir_->file("two-nodes/last.h5") + " " +
                                dir_->file("one-node/last.h5") + " /model /model");
  EXPECT_EQ(diff.exit_code, 0) << diff.output;
}

TEST_F(MultiNodeRehearsal, DecodeAcrossTwoHostsWritesTheBytesOfOneRankOnOneMachine) {
  const auto trained = run_command(train("", "decoder") + " --set train.max_steps=40");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  std::string input;
  for (int copy = 0; copy < 10; ++copy) input += read_text(dir_->file("test.src"));
  write_file(dir_->file("input.txt"), input);
  const std::string decode = tool("tandem-decode") + " --checkpoint " +
                             dir_->file("decoder/last.h5") + " --input " +
                             dir_->file("input.txt") + " --chunk-lines 25 --threads 1 --output ";
  const auto one = run_command(decode + dir_->file("one.txt"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  // The launcher on nodeA starts one rank per host from the rehearsal's hostfile.
  const auto two = run_command(kLauncher + " --launcher -- " + decode + dir_->file("two.txt") +
                               " --hostfile {hostfile}");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("tandem-decode: 2 ranks on 2 host(s) under mpirun"),
            std::string::npos)
      << two.output;
  EXPECT_NE(two.output.find("on 2 rank(s)"), std::string::npos) << two.output;
  EXPECT_EQ(lines_of(read_text(dir_->file("one.txt"))).size(), 400u);
  EXPECT_EQ(read_text(dir_->file("two.txt")), read_text(dir_->file("one.txt")));
  // nodeB's chunks came back over the link: translations of some of the 16 chunks.
  const std::string back = "bytes nodeA->nodeB, ";
  const size_t at = two.output.find(back);
  ASSERT_NE(at, std::string::npos) << two.output;
  EXPECT_GT(std::stoll(two.output.substr(at + back.size())), 2000) << two.output;
}

}  // namespace
}  // namespace tandem::test
