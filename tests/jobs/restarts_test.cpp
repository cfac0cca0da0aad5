// What the restarting launcher decides without running a job: what the ranks' state records and
// mpirun's last words (texts as Open MPI 4.1.4 prints them) say about a failure, when two failures
// are the same, when not to restart, and the metrics file keeping the launcher's restart records when a resumed run drops what came after
// its checkpoint.
#include "trainer/jobs/restarts.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainer/common/temp_dir.h"
#include "trainer/jobs/hosts.h"
#include "trainer/jobs/job_failure.h"
#include "trainer/train/metrics_log.h"

namespace tandem::jobs {
namespace {

const std::vector<std::string> kKilled = {
    "--------------------------------------------------------------------------",
    "Primary job  terminated normally, but 1 process returned",
    "a non-zero exit code. Per user-direction, the job has been aborted.",
    "--------------------------------------------------------------------------",
    "--------------------------------------------------------------------------",
    "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).",
    "--------------------------------------------------------------------------"};

const std::vector<std::string> kExited = {
    "--------------------------------------------------------------------------",
    "mpirun detected that one or more processes exited with non-zero status, thus causing",
    "the job to be terminated. The first process to do so was:",
    "",
    "  Process name: [[14997,1],1]",
    "  Exit code:    3",
    "--------------------------------------------------------------------------"};

const std::vector<std::string> kAborted = {
    "--------------------------------------------------------------------------",
    "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD",
    "with errorcode 1.",
    "",
    "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
    "--------------------------------------------------------------------------"};

// A rank's state record as jobs/rank_state.h writes it.
RankState record(int rank, RankState::Outcome outcome, int64_t step, int exit_code,
                 const std::string& error = "", double time = 100) {
  RankState state;
  state.rank = rank;
  state.host = "node" + std::to_string(rank);
  state.outcome = outcome;
  state.at = step;
  state.exit_code = exit_code;
  state.error = error;
  state.time = time;
  return state;
}

RankState failed(int rank, int64_t step, const std::string& error, double time = 100) {
  return record(rank, RankState::Outcome::kFailed, step, 1, error, time);
}

RankState timed_out(int rank, double time = 100) {
  return record(rank, RankState::Outcome::kTimedOut, -1, 1,
                "collective all_reduce_sum #156 did not complete within 5 s; a peer is dead or "
                "stuck",
                time);
}

// Rank 1 raised in step 25; rank 0's watchdog gave up on it afterwards.
const std::vector<RankState> kRaised = {timed_out(0, 105),
                                        failed(1, 25, "fault injected at step 25 on rank 1", 100)};

const std::vector<std::string> kLostHost = {
    "--------------------------------------------------------------------------",
    "ORTE has lost communication with a remote daemon.",
    "",
    "  HNP daemon   : [[55297,0],0] on node nodeA",
    "  Remote daemon: [[55297,0],1] on node nodeB",
    "",
    "This is usually due to either a failure of the TCP network",
    "--------------------------------------------------------------------------"};

TEST(JobFailure, ASignalNamesTheRankTheHostAndTheSignal) {
  const JobFailure f = parse_job_failure(kKilled, 137, {});
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.host, "vm");
  EXPECT_EQ(f.how, "killed by signal 9 (Killed)");
  EXPECT_EQ(f.at, -1);
  EXPECT_EQ(f.kind, FailureKind::kFailed);
  EXPECT_EQ(describe(f), "rank 1 on vm: killed by signal 9 (Killed)");
}

TEST(JobFailure, AnExitCodeNamesTheRank) {
  const JobFailure f = parse_job_failure(kExited, 3, {});
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.how, "exited with code 3");
  EXPECT_EQ(f.kind, FailureKind::kFailed);
  auto usage = kExited;
  usage[5] = "  Exit code:    2";
  EXPECT_EQ(parse_job_failure(usage, 2, {}).kind, FailureKind::kUsage);
  for (int code : {129, 130, 138, 143}) {
    usage[5] = "  Exit code:    " + std::to_string(code);
    EXPECT_EQ(parse_job_failure(usage, code, {}).kind, FailureKind::kStopped) << code;
  }
  usage[5] = "  Exit code:    137";
  EXPECT_EQ(parse_job_failure(usage, 137, {}).kind, FailureKind::kFailed);
}

TEST(JobFailure, ARankThatThrowsNamesItsStepAndErrorNotAnotherRanks) {
  const JobFailure f = parse_job_failure(kAborted, 1, kRaised);
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(f.host, "node1");
  EXPECT_EQ(f.at, 25);
  EXPECT_EQ(f.how, "called MPI_Abort with error code 1");
  EXPECT_EQ(f.message, "fault injected at step 25 on rank 1");
  EXPECT_EQ(
      describe(f),
      "rank 1 on node1: called MPI_Abort with error code 1 in step 25 (fault injected at step "
      "25 on rank 1)");
  // Rank 0's watchdog record is about rank 1's failure, not its own: it is not the message.
  const JobFailure g = parse_job_failure(kAborted, 1, {kRaised[0], failed(1, -1, "no such file")});
  EXPECT_EQ(g.rank, 1);
  EXPECT_EQ(g.at, -1);
  EXPECT_EQ(g.message, "no such file");
  // mpirun named no one (its notice garbled): the first rank to fail is the one.
  const JobFailure h = parse_job_failure({"garbled"}, 1, kRaised);
  EXPECT_EQ(h.rank, 1);
  EXPECT_EQ(h.at, 25);
  EXPECT_EQ(h.how, "mpirun exited with status 1");
}

TEST(JobFailure, AWatchdogExitIsTheWatchingRanksWithItsMessage) {
  auto lines = kExited;
  lines[5] = "  Exit code:    1";
  lines[4] = "  Process name: [[14997,1],0]";
  const JobFailure f = parse_job_failure(lines, 1, {timed_out(0)});
  EXPECT_EQ(f.rank, 0);
  EXPECT_EQ(f.how, "exited with code 1");
  EXPECT_EQ(f.at, -1);
  EXPECT_NE(f.message.find("a peer is dead or stuck"), std::string::npos);
  // A host lost without a word from mpirun: the rank that waited for it is not the failure.
  const JobFailure lost = parse_job_failure({}, 0, {timed_out(0)});
  EXPECT_EQ(lost.rank, -1);
  EXPECT_EQ(lost.message, "");
  EXPECT_EQ(describe(lost),
            "the job: mpirun exited with status 0 before rank 0 said the job "
            "finished");
}

// What the ranks record decides what mpirun's exit cannot: a stop they were asked for, and bad
// input (exit code 2), which a restart does not mend. A rank killed by a signal overrides both.
TEST(JobFailure, TheRecordsSayAStopOrBadInput) {
  const auto stopped = record(0, RankState::Outcome::kStopped, 40, 143);
  EXPECT_EQ(parse_job_failure({}, 1, {stopped}).kind, FailureKind::kStopped);
  EXPECT_EQ(parse_job_failure(kKilled, 137, {stopped}).kind, FailureKind::kFailed);
  const auto bad_input = record(1, RankState::Outcome::kFailed, -1, 2, "data.corpus: no such file");
  const JobFailure f = parse_job_failure(kAborted, 1, {bad_input});
  EXPECT_EQ(f.kind, FailureKind::kUsage);
  EXPECT_EQ(reason_not_to_restart(f, nullptr, 0, -1, 0, 3),
            "bad input (exit code 2), which a restart does not mend");
}

TEST(JobFailure, ALostDaemonIsAnUnreachableHost) {
  const JobFailure f = parse_job_failure(kLostHost, 1, {});
  EXPECT_EQ(f.kind, FailureKind::kUnreachable);
  EXPECT_EQ(f.host, "nodeB");
  EXPECT_EQ(describe(f), "host nodeB: host unreachable (mpirun lost contact with its daemon)");
}

TEST(JobFailure, WithoutNoticesTheStatusSays) {
  const JobFailure f = parse_job_failure({"some output"}, 143, {});
  EXPECT_EQ(f.rank, -1);
  EXPECT_EQ(f.how, "mpirun exited with status 143");
  EXPECT_EQ(f.kind, FailureKind::kStopped);
  EXPECT_EQ(describe(f), "the job: mpirun exited with status 143");
}

// mpirun's status 0 says the job finished only with rank 0's record of it (under SLURM, Open MPI's
// mpirun exits 0 when SLURM ends its daemon's step on a failed node).
TEST(JobFailure, StatusZeroWithoutRankZerosRecordIsAFailure) {
  const auto finished = [](int rank) { return record(rank, RankState::Outcome::kFinished, 60, 0); };
  EXPECT_TRUE(job_finished({finished(0), finished(1)}));
  EXPECT_TRUE(job_finished({finished(0)}));
  EXPECT_FALSE(job_finished({finished(1)}));
  EXPECT_FALSE(job_finished({}));
  EXPECT_FALSE(job_finished({failed(0, 37, "out of memory"), finished(1)}));
  const JobFailure f = parse_job_failure({}, 0, {finished(1)});
  EXPECT_EQ(f.how, "mpirun exited with status 0 before rank 0 said the job finished");
  EXPECT_EQ(f.kind, FailureKind::kFailed);
  EXPECT_EQ(reason_not_to_restart(f, nullptr, 30, -1, 0, 3), "");
  EXPECT_EQ(failure_exit_code(0), 1);
}

TEST(JobFailure, SameFailureIsTheSameErrorInTheSameStepOrTheSameWayWithoutOne) {
  const auto thrown = [](int64_t step, const std::string& message) {
    JobFailure f;
    f.rank = 1;
    f.at = step;
    f.message = message;
    f.how = "called MPI_Abort with error code 1";
    return f;
  };
  EXPECT_TRUE(same_failure(thrown(25, "bad batch"), thrown(25, "bad batch")));
  EXPECT_FALSE(same_failure(thrown(25, "bad batch"), thrown(26, "bad batch")));
  EXPECT_FALSE(same_failure(thrown(25, "bad batch"), thrown(25, "out of memory")));
  // mpirun's notice garbled once: the rank's own words still decide.
  JobFailure garbled = thrown(25, "bad batch");
  garbled.how = "mpirun exited with status 1";
  EXPECT_TRUE(same_failure(thrown(25, "bad batch"), garbled));
  const JobFailure killed = parse_job_failure(kKilled, 137, {});
  EXPECT_TRUE(same_failure(killed, killed));
  EXPECT_FALSE(same_failure(killed, parse_job_failure(kExited, 3, {})));
  EXPECT_FALSE(same_failure(killed, thrown(25, "bad batch")));
}

TEST(Restarts, WhenNotToRestart) {
  const JobFailure killed = parse_job_failure(kKilled, 137, {});
  EXPECT_EQ(reason_not_to_restart(killed, nullptr, 20, -1, 0, 1), "");
  EXPECT_EQ(reason_not_to_restart(killed, nullptr, 20, -1, 1, 1),
            "no restart left (--max-restarts 1)");
  // Killed the same way again: a loop only if no newer checkpoint came in between.
  EXPECT_EQ(reason_not_to_restart(killed, &killed, 40, 20, 1, 3), "");
  EXPECT_EQ(reason_not_to_restart(killed, &killed, 20, 20, 1, 3),
            "the same failure came back after a restart from step 20");
  const JobFailure thrown = parse_job_failure(kAborted, 1, kRaised);
  EXPECT_EQ(reason_not_to_restart(thrown, &thrown, 20, 20, 1, 3),
            "the same failure came back after a restart from step 20, in step 25");
  // A file job's, in chunks.
  EXPECT_EQ(reason_not_to_restart(thrown, &thrown, 20, 20, 1, 3, JobUnit::kChunk),
            "the same failure came back after a restart from 20 chunk(s) done, in chunk 25");
  EXPECT_EQ(describe(thrown, JobUnit::kChunk),
            "rank 1 on node1: called MPI_Abort with error code 1 in chunk 25 (fault injected at "
            "step 25 on rank 1)");
  auto exited = kExited;
  exited[5] = "  Exit code:    2";
  EXPECT_EQ(reason_not_to_restart(parse_job_failure(exited, 2, {}), nullptr, 0, -1, 0, 3),
            "bad input (exit code 2), which a restart does not mend");
  exited[5] = "  Exit code:    138";
  EXPECT_EQ(reason_not_to_restart(parse_job_failure(exited, 138, {}), nullptr, 0, -1, 0, 3),
            "the ranks stopped on request");
}

TEST(Restarts, AResumedRunKeepsTheRestartRecordsUpToItsStep) {
  TempDir dir("restart-metrics");
  const std::string path = dir.file("metrics.jsonl");
  const train::MetricsOutputs outputs{path, ""};  // no event files
  train::append_metrics_record(outputs, {{"event", "restart"}, {"step", 0}});
  {
    train::MetricsLog log(outputs, 0);  // a fresh start keeps the restart from scratch
    for (int step = 1; step <= 30; ++step) log.write({{"step", step}, {"loss", 1.0 / step}});
  }
  train::append_metrics_record(outputs, {{"event", "restart"}, {"step", 20}});
  { train::MetricsLog log(outputs, 20); }  // what the resumed run keeps
  std::ifstream in(path);
  std::vector<nlohmann::json> kept;
  for (std::string line; std::getline(in, line);) kept.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(kept.size(), 22u);
  EXPECT_EQ(kept.front()["event"], "restart");
  EXPECT_EQ(kept[20]["step"], 20);
  EXPECT_EQ(kept.back(), (nlohmann::json{{"event", "restart"}, {"step", 20}}));
}

TEST(Hosts, AHostfileReadsAsOpenMpiReadsIt) {
  TempDir dir("hostfile");
  const std::string path = dir.file("hosts");
  std::ofstream(path) << "# the cluster\nnode01 slots=8\n\nnode02 max_slots=4 slots=2  # two GPUs\n"
                         "node03\n";
  const auto hosts = read_hostfile(path);
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].name, "node01");
  EXPECT_EQ(hosts[0].slots, 8);
  EXPECT_EQ(hosts[1].slots, 2);
  EXPECT_EQ(hosts[2].slots, 1);
  EXPECT_EQ(total_slots(hosts), 11);
  EXPECT_EQ(hostfile_text(hosts), "node01 slots=8\nnode02 slots=2\nnode03 slots=1\n");
  std::ofstream(path) << hostfile_text(hosts);
  EXPECT_EQ(hostfile_text(read_hostfile(path)), hostfile_text(hosts));

  for (const char* bad : {"node01 slots=0\n", "node01 slots=x\n", "# none\n"}) {
    std::ofstream(path) << bad;
    try {
      read_hostfile(path);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_hostfile(dir.file("missing")), std::invalid_argument);
}

TEST(Hosts, AHostAnswersWhenItAcceptsOrRefusesAConnection) {
  std::string why;
  EXPECT_TRUE(host_answers("localhost", 22, 1.0, &why));
  // 127.0.0.2 is not this host's name, so it is asked: first with a listener, then without one.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = inet_addr("127.0.0.2");
  socklen_t size = sizeof address;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const int port = ntohs(address.sin_port);
  EXPECT_TRUE(host_answers("127.0.0.2", port, 5.0, &why)) << why;
  close(listener);
  EXPECT_TRUE(host_answers("127.0.0.2", port, 5.0, &why)) << why;  // refused: it answered
  // A host that does not answer is e2e_restart_tests' (a network namespace whose link is down):
  // this machine's network may answer for any outside address.
}

}  // namespace
}  // namespace tandem::jobs
