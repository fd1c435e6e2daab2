// corio::detail::accept_stash: oldest connection first, and a closed listener's kept connections
// are closed (their peers see the end of the stream), then and afterwards.
#include <corio/detail/accept_stash.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>

namespace {

using corio::detail::accept_stash;

// A connected pair of stream sockets: [0] plays the accepted connection, [1] its client.
struct connection {
  std::array<int, 2> ends{-1, -1};
  connection() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends.data()), 0); }
  ~connection() { ::close(ends[1]); }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  // Whether the client's end reads the end of the stream (its peer was closed); it never blocks.
  bool client_sees_end() const {
    char byte = 0;
    return ::recv(ends[1], &byte, 1, MSG_DONTWAIT) == 0;
  }
};

TEST(accept_stash, hands_kept_connections_out_oldest_first_then_reports_none) {
  accept_stash stash;
  EXPECT_EQ(stash.take(), -1);
  connection first;
  connection second;
  stash.keep(first.ends[0]);
  stash.keep(second.ends[0]);
  EXPECT_EQ(stash.take(), first.ends[0]);
  EXPECT_EQ(stash.take(), second.ends[0]);
  EXPECT_EQ(stash.take(), -1);
  EXPECT_FALSE(first.client_sees_end());  // handed out, not closed
  ::close(first.ends[0]);
  ::close(second.ends[0]);
}

TEST(accept_stash, closing_closes_what_it_kept_and_whatever_is_kept_afterwards) {
  connection before;
  connection after;
  accept_stash stash;
  stash.keep(before.ends[0]);
  stash.close_all();
  EXPECT_TRUE(before.client_sees_end());
  EXPECT_EQ(stash.take(), -1);
  stash.keep(after.ends[0]);  // an accept in flight as the listener closed
  EXPECT_TRUE(after.client_sees_end());
  EXPECT_EQ(stash.take(), -1);
}

TEST(accept_stash, destroying_it_closes_what_it_kept) {
  connection kept;
  {
    accept_stash stash;
    stash.keep(kept.ends[0]);
  }
  EXPECT_TRUE(kept.client_sees_end());
}

}  // namespace
