// The hosts of a multi-node job: an Open MPI hostfile read and written, and whether a host still
// answers on the network.
#pragma once

#include <string>
#include <vector>

namespace tandem::jobs {

struct Host {
  std::string name;
  int slots = 1;  // ranks it runs (one per GPU, or per train.threads cores)
};

// The hosts of an Open MPI hostfile, one per line: "node01 slots=8" (no slots=: 1; other
// key=value fields such as max_slots are ignored; # starts a comment). std::invalid_argument naming
// the file (and the line) when it cannot be read, names no host, or gives a bad slot count.
std::vector<Host> read_hostfile(const std::string& path);

// "node01 slots=8" lines, as read_hostfile reads them.
std::string hostfile_text(const std::vector<Host>& hosts);

// Sum of the hosts' slots.
int total_slots(const std::vector<Host>& hosts);

// Whether `host` answers within `timeout_s`: this machine does (its name, localhost); another is
// asked for a TCP connection on `port` (ssh's, by default), and a connection or a refusal is an
// answer, while silence, or no route to it, is not. `why` says what happened when it did not.
bool host_answers(const std::string& host, int port, double timeout_s, std::string* why);

}  // namespace tandem::jobs
