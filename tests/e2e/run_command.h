// Running the real tool binaries from end-to-end tests: a command line, its exit code and output.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tandem::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh, stderr merged into stdout.
CommandResult run_command(const std::string& command);

// A command running in the background whose output is read line by line, so a test can act on
// an event in it (e.g. "a checkpoint was saved") rather than after a guessed delay.
class BackgroundCommand {
 public:
  explicit BackgroundCommand(const std::string& command);
  ~BackgroundCommand();  // kills what is still running
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;

  // Reads output until a line containing `text` has arrived; false if the output ended first.
  bool wait_for_line(const std::string& text);
  // Reads output as it comes until `done()` holds, asking it whenever output arrives and at least
  // every 50 ms (for what the command writes to files: metrics.jsonl, state records); false if
  // the output ended and done() still does not hold.
  bool wait_until(const std::function<bool()>& done);
  // Reads the rest of the output and returns the exit code (128 + signal when killed).
  int wait();
  // Sends `sig` to the command's process only (start the command with "exec" to make that the
  // program itself, e.g. mpirun, rather than the shell).
  void signal(int sig);
  // SIGKILL to the command and every process it started, all stopped first so that none reacts
  // to another's death; returns once none of them can run again.
  void kill_all();
  // The process id of MPI rank `rank` among the processes the command started (the launcher
  // puts OMPI_COMM_WORLD_RANK, or PMI_RANK, in each rank's environment), or -1 if none is running.
  int rank_pid(int rank) const;
  int pid() const { return pid_; }
  const std::string& output() const { return output_; }

 private:
  int pid_ = -1;
  int fd_ = -1;
  std::string output_;
  size_t scanned_ = 0;  // output_ before this offset holds no complete unmatched line
};

// Every record of the metrics.jsonl at `path`, in order; a last line still being written is left
// out.
std::vector<nlohmann::json> metrics_records(const std::string& path);

// The last line of a tool's `output` that starts with '{' (its --json line), parsed;
// std::runtime_error quoting the output when it has none.
nlohmann::json last_json_line(const std::string& output);

// Those of them without an "event": the training records.
std::vector<nlohmann::json> training_records(const std::string& path);

// Whether the metrics.jsonl at `path` holds a training record of step `step` or later: a run's
// progress, read from the file made for it rather than from its log lines.
bool reached_step(const std::string& path, int64_t step);

// Waits until process `pid` has ended (gone, or a zombie waiting to be reaped), on a pidfd; false
// if it still runs at `deadline`. For processes that are not the caller's children.
bool wait_until_ended(int pid, std::chrono::steady_clock::time_point deadline);

// The path of a built tool, e.g. tool("tandem-train").
std::string tool(const std::string& name);

// "mpirun --oversubscribe -np N -x ..." with the environment the tests need (root allowed).
std::string mpirun(int ranks);

// Writes `text` to `path`.
void write_file(const std::string& path, const std::string& text);

// The whole of the file at `path` ("" when it cannot be read).
std::string read_text(const std::string& path);

// `text` split at newlines, without them.
std::vector<std::string> lines_of(const std::string& text);

}  // namespace tandem::test
