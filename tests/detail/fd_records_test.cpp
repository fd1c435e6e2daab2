// The per-number records a socket's close consults (src/io/fd_records.hpp): every number a
// descriptor can have gets one, and a record that more reactors noted than it has slots for says so.
#include "io/fd_records.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>

namespace {

using corio::detail::fd_record;
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

}  // namespace
