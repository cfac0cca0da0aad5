// Mailbox between the ranks of an mpirun job (np 2 and 4): every rank's messages reach rank 0 with
// their source, tag and bytes (binary, empty and large ones alike), in the order each rank sent
// them; poll() finds nothing before anything is sent and returns at once; replies reach each rank.
#include "trainer/parallel/mailbox.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/common/mpi_test.h"

namespace tandem::parallel {
namespace {

using test::process_group;

// The bytes rank `rank` sends as its message `i`: NUL bytes inside, one of them 3 MiB (MPI's
// rendezvous protocol), one empty.
std::string payload(int rank, int i) {
  if (i == 1) return "";
  std::string bytes = "rank " + std::to_string(rank) + " message " + std::to_string(i) + '\0' + "x";
  if (i == 2) bytes += std::string(3u << 20, static_cast<char>('a' + rank));
  return bytes;
}

TEST(Mailbox, MessagesReachRankZeroInOrderPerSenderAndRepliesComeBack) {
  auto& group = process_group();
  Mailbox mailbox(group);
  constexpr int kMessages = 4;
  group.cpu().barrier();
  if (group.rank() == 0) {
    std::map<int, int> next;  // per sender, the message expected next
    for (int got = 0; got < kMessages * (group.size() - 1); ++got) {
      const Message message = mailbox.receive();
      ASSERT_GT(message.source, 0);
      const int i = next[message.source]++;
      EXPECT_EQ(message.tag, 10 + i);
      EXPECT_EQ(message.bytes, payload(message.source, i));
    }
    EXPECT_FALSE(mailbox.poll().has_value());
    for (int rank = 1; rank < group.size(); ++rank)
      mailbox.send(rank, 7, "reply " + std::to_string(rank));
  } else {
    for (int i = 0; i < kMessages; ++i) mailbox.send(0, 10 + i, payload(group.rank(), i));
    const Message reply = mailbox.receive();
    EXPECT_EQ(reply.source, 0);
    EXPECT_EQ(reply.tag, 7);
    EXPECT_EQ(reply.bytes, "reply " + std::to_string(group.rank()));
  }
  group.cpu().barrier();
  EXPECT_FALSE(mailbox.poll().has_value());
}

}  // namespace
}  // namespace tandem::parallel
