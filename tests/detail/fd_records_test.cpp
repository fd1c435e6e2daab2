// The per-number records a socket's close consults (src/io/fd_records.hpp): every number a
// descriptor can have gets one, and a record that more reactors noted than it has slots for says so.
#include "io/fd_records.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <climits>
#include <cstdint>
#include <utility>

#include <corio/detail/socket.hpp>

namespace {

using corio::detail::closed_since_opened;
using corio::detail::fd_record;
using corio::detail::generation_in;
using corio::detail::io_request;
using corio::detail::socket_fd;
using corio::detail::socket_id;
using corio::detail::note_watcher;
using corio::detail::record_of;
using corio::detail::watcher_slots;

// Only a raised fs.nr_open lets a process have such numbers, so no socket test reaches them.
TEST(fd_records, every_descriptor_number_has_a_record) {
  for (int fd : {0, 1023, 1024, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 1 << 30, INT_MAX - 1, INT_MAX}) {
    fd_record* record = record_of(fd, true);
    ASSERT_NE(record, nullptr) << fd;
    EXPECT_EQ(record_of(fd, false), record) << fd;
    EXPECT_EQ(record_of(fd, true), record) << fd;
  }
  EXPECT_NE(record_of(INT_MAX, true), record_of(INT_MAX - 1, true));
  EXPECT_NE(record_of(1 << 20, true), record_of(0, true));
  EXPECT_EQ(record_of(-1, true), nullptr);
}

TEST(fd_records, a_number_nobody_used_has_no_record_until_one_is_created) {
  constexpr int far = (1 << 29) + 12345;  // a directory no other test touches
  EXPECT_EQ(record_of(far, false), nullptr);
  EXPECT_NE(record_of(far, true), nullptr);
}

TEST(fd_records, more_watchers_than_slots_mark_the_record_crowded) {
  fd_record* record = record_of((1 << 28) + 7, true);
  ASSERT_NE(record, nullptr);
  for (std::uint32_t id = 1; id <= watcher_slots; ++id) {
    note_watcher(record, id);
    note_watcher(record, id);  // noted once
  }
  EXPECT_FALSE(record->crowded.load());
  for (std::uint32_t id = 1; id <= watcher_slots; ++id) {
    EXPECT_EQ(record->watchers[id - 1].load(), id);
  }
  note_watcher(record, watcher_slots + 1);
  EXPECT_TRUE(record->crowded.load());
  for (std::uint32_t id = 1; id <= watcher_slots; ++id) {
    EXPECT_EQ(record->watchers[id - 1].load(), id) << "a watcher was displaced";
  }
}

int fresh_socket() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  return fd;
}

// What an operation carries (io_op.hpp): the number, its generation and its record, found when the
// socket opened. A record of another number would make its operations fail as if closed.
void expect_names(const socket_fd& socket, int fd) {
  socket_id id = socket.id();
  EXPECT_EQ(id.fd, fd);
  EXPECT_EQ(id.record, record_of(fd, false));
  EXPECT_EQ(id.generation, generation_in(record_of(fd, false)));
}

TEST(fd_records, a_socket_names_its_own_number_s_record_through_moves_and_resets) {
  const int first = fresh_socket();
  const int second = fresh_socket();
  socket_fd a(first);
  expect_names(a, first);
  socket_fd b(std::move(a));
  expect_names(b, first);
  EXPECT_EQ(a.id().fd, -1);
  socket_fd c(second);
  expect_names(c, second);
  c = std::move(b);  // closes `second`
  expect_names(c, first);
  const int third = fresh_socket();
  c.reset(third);  // closes `first`
  expect_names(c, third);
}

TEST(fd_records, an_operation_made_before_its_socket_closed_sees_the_close_through_its_record) {
  socket_fd socket(fresh_socket());
  socket_id id = socket.id();
  io_request op;
  op.fd = id.fd;
  op.generation = id.generation;
  op.record = id.record;
  EXPECT_FALSE(closed_since_opened(op));
  socket.reset();
  EXPECT_TRUE(closed_since_opened(op));
  op.record = nullptr;  // memory ran out when it opened: looked up instead
  EXPECT_TRUE(closed_since_opened(op));
}

}  // namespace
