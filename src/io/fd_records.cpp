// The per-number records, the reactor registry and close_socket(); the design note is in
// fd_records.hpp.
#include "io/fd_records.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <new>
#include <vector>

#include <corio/detail/io_slot.hpp>
#include <corio/detail/socket.hpp>

#include "io/reactor.hpp"

namespace corio::detail {
namespace {

// 1024 lazily allocated chunks of 1024 records: numbers up to 2^20.
constexpr std::size_t chunk_size = 1024;
constexpr std::size_t chunk_count = 1024;
std::array<std::atomic<fd_record*>, chunk_count> record_chunks{};

struct reactor_registry {
  std::mutex mutex;
  std::vector<reactor*> live;  // one per worker and loop that did I/O
  std::uint32_t next_id = 1;
};

reactor_registry& registry() {
  static auto* shared = new reactor_registry;  // never destroyed: a reactor may outlive static destruction
  return *shared;
}

// The closing thread, before the close: the watcher `id` ends its requests on `fd` at its next reap.
void tell_watcher(std::uint32_t id, int fd, std::uint32_t generation) noexcept {
  reactor_registry& shared = registry();
  std::lock_guard lock(shared.mutex);
  auto found = std::find_if(shared.live.begin(), shared.live.end(), [id](const reactor* each) { return each->id() == id; });
  if (found != shared.live.end()) {
    (*found)->forget_elsewhere(fd, generation);
    (*found)->wake();
  }
}

}  // namespace

fd_record* record_of(int fd, bool create) noexcept {
  auto index = static_cast<std::size_t>(fd);
  if (index >= chunk_size * chunk_count) {
    return nullptr;
  }
  auto& chunk = record_chunks[index / chunk_size];
  fd_record* records = chunk.load(std::memory_order_acquire);
  if (records == nullptr) {
    if (!create) {
      return nullptr;
    }
    auto* fresh = new (std::nothrow) fd_record[chunk_size];
    if (fresh == nullptr) {
      return nullptr;
    }
    if (chunk.compare_exchange_strong(records, fresh, std::memory_order_acq_rel)) {
      records = fresh;  // kept for the process's life, like the descriptor table it mirrors
    } else {
      delete[] fresh;
    }
  }
  return &records[index % chunk_size];
}

std::uint32_t enroll(reactor& self) {
  reactor_registry& shared = registry();
  std::lock_guard lock(shared.mutex);
  shared.live.push_back(&self);
  std::uint32_t id = shared.next_id++;
  if (shared.next_id == 0) {
    shared.next_id = 1;
  }
  return id;
}

void withdraw(reactor& self) noexcept {
  reactor_registry& shared = registry();
  std::lock_guard lock(shared.mutex);
  std::erase(shared.live, &self);
}

std::mutex& registry_mutex() noexcept { return registry().mutex; }

void close_socket(int fd) noexcept {
  if (fd < 0) {
    return;
  }
  io_slot* here = current_io_slot;
  if (here != nullptr) {
    here->forget(fd);  // ops this thread's reactor holds on the socket end now, before the number can be reused
  }
  if (fd_record* record = record_of(fd, false)) {
    std::uint32_t generation = record->generation.fetch_add(1, std::memory_order_relaxed);
    for (auto& slot : record->watchers) {
      std::uint32_t watcher = slot.exchange(0, std::memory_order_relaxed);
      if (watcher != 0 && (here == nullptr || watcher != here->reactor_id())) {
        tell_watcher(watcher, fd, generation);
      }
    }
  }
  ::close(fd);
}

}  // namespace corio::detail
