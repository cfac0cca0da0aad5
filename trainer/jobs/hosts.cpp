#include "trainer/jobs/hosts.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "trainer/common/host_name.h"
#include "trainer/common/whole_number.h"

namespace tandem::jobs {
namespace {

bool is_this_host(const std::string& host) {
  const std::string self = host_name();
  return host == "localhost" || host == "127.0.0.1" || host == self ||
         host == self.substr(0, self.find('.')) || self == host.substr(0, host.find('.'));
}

// One connection attempt to `address` within `timeout_ms`: "" when it connected or was refused
// (the host answered), else what happened.
std::string try_connect(const addrinfo& address, int timeout_ms) {
  const int fd = socket(address.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  int error = connect(fd, address.ai_addr, address.ai_addrlen) == 0 ? 0 : errno;
  if (error == EINPROGRESS) {
    pollfd done{fd, POLLOUT, 0};
    const int ready = poll(&done, 1, timeout_ms);
    socklen_t size = sizeof error;
    if (ready == 0) {
      error = ETIMEDOUT;
    } else if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
      error = errno;
    }
  }
  close(fd);
  if (error == 0 || error == ECONNREFUSED) return "";
  return error == ETIMEDOUT ? "no answer within the timeout" : std::strerror(error);
}

}  // namespace

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("hostfile '" + path + "': cannot read it");
  std::vector<Host> hosts;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    Host host;
    if (!(fields >> host.name)) continue;
    for (std::string field; fields >> field;) {
      if (field.rfind("slots=", 0) != 0) continue;
      const auto slots = parse_whole_number(field.substr(6));
      if (!slots || *slots < 1 || *slots > 100000) {
        throw std::invalid_argument("hostfile '" + path + "' line " + std::to_string(number) +
                                    ": '" + field + "': expected slots=N with N >= 1");
      }
      host.slots = static_cast<int>(*slots);
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) throw std::invalid_argument("hostfile '" + path + "': names no host");
  return hosts;
}

std::string hostfile_text(const std::vector<Host>& hosts) {
  std::string text;
  for (const auto& host : hosts) text += host.name + " slots=" + std::to_string(host.slots) + "\n";
  return text;
}

int total_slots(const std::vector<Host>& hosts) {
  int slots = 0;
  for (const auto& host : hosts) slots += host.slots;
  return slots;
}

bool host_answers(const std::string& host, int port, double timeout_s, std::string* why) {
  if (is_this_host(host)) return true;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (status != 0) {
    if (why != nullptr) *why = std::string("unknown host: ") + gai_strerror(status);
    return false;
  }
  std::string last = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    last = try_connect(*a, static_cast<int>(timeout_s * 1000));
    if (last.empty()) break;
  }
  freeaddrinfo(found);
  if (!last.empty() && why != nullptr) *why = last;
  return last.empty();
}

}  // namespace tandem::jobs
