// The per-number records, the reactor registry and close_socket(); the design note is in
// fd_records.hpp.
#include "io/fd_records.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <new>
#include <thread>
#include <vector>

#include <corio/detail/io_slot.hpp>
#include <corio/detail/socket.hpp>

#include "io/reactor.hpp"

namespace corio::detail {
namespace {

// Records for every number from 0 to 2^31 - 1: 2048 directories of 1024 chunks of 1024 records.
constexpr std::size_t chunk_size = 1024;
constexpr std::size_t chunks_per_directory = 1024;
constexpr std::size_t directory_count = 2048;

struct fd_chunk {
  std::array<fd_record, chunk_size> records;
};

struct fd_directory {
  std::array<std::atomic<fd_chunk*>, chunks_per_directory> chunks{};
};

std::array<std::atomic<fd_directory*>, directory_count> directories{};

// What `slot` points to; if nothing and `create`, a new T, which the first of racing creators installs.
// Null if there was nothing and it was not created (or memory ran out). Never freed: see fd_records.hpp.
template <class T>
T* load_or_create(std::atomic<T*>& slot, bool create) noexcept {
  T* current = slot.load(std::memory_order_acquire);
  if (current != nullptr || !create) {
    return current;
  }
  auto* fresh = new (std::nothrow) T();
  if (fresh == nullptr) {
    return nullptr;
  }
  if (slot.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) {
    return fresh;
  }
  delete fresh;
  return current;
}

struct reactor_registry {
  std::mutex mutex;
  std::vector<reactor*> live;  // one per worker and loop that did I/O
  std::uint32_t next_id = 1;
};

reactor_registry& registry() {
  static auto* shared = new reactor_registry;  // never destroyed: a reactor may outlive static destruction
  return *shared;
}

// The closing thread, before the close, under the registry's mutex: `watcher` ends its requests on
// `fd` at its next reap.
void tell(reactor& watcher, int fd, std::uint32_t generation) noexcept {
  watcher.forget_elsewhere(fd, generation);
  watcher.wake();
}

void tell_watcher(std::uint32_t id, int fd, std::uint32_t generation) noexcept {
  reactor_registry& shared = registry();
  std::lock_guard lock(shared.mutex);
  auto found = std::find_if(shared.live.begin(), shared.live.end(), [id](const reactor* each) { return each->id() == id; });
  if (found != shared.live.end()) {
    tell(**found, fd, generation);
  }
}

// The same for every live reactor but `own` (0: none): more watched the number than it has slots.
void tell_every_reactor_but(std::uint32_t own, int fd, std::uint32_t generation) noexcept {
  reactor_registry& shared = registry();
  std::lock_guard lock(shared.mutex);
  for (reactor* each : shared.live) {
    if (each->id() != own) {
      tell(*each, fd, generation);
    }
  }
}

}  // namespace

fd_record* record_of(int fd, bool create) noexcept {
  if (fd < 0) {
    return nullptr;
  }
  auto index = static_cast<std::size_t>(fd);
  static_assert(directory_count * chunks_per_directory * chunk_size > std::size_t{INT_MAX});
  fd_directory* directory = load_or_create(directories[index / (chunks_per_directory * chunk_size)], create);
  if (directory == nullptr) {
    return nullptr;
  }
  fd_chunk* chunk = load_or_create(directory->chunks[index / chunk_size % chunks_per_directory], create);
  return chunk != nullptr ? &chunk->records[index % chunk_size] : nullptr;
}

void enroll(reactor& self, std::uint32_t& id) {
  reactor_registry& shared = registry();
  std::lock_guard lock(shared.mutex);
  shared.live.push_back(&self);
  // Under the mutex, like every read of it by a closing thread (tell_watcher): written after it,
  // the id raced with those reads (a user trial's TSan run).
  id = shared.next_id++;
  if (shared.next_id == 0) {
    shared.next_id = 1;
  }
}

void withdraw(reactor& self) noexcept {
  reactor_registry& shared = registry();
  std::lock_guard lock(shared.mutex);
  std::erase(shared.live, &self);
}

std::mutex& registry_mutex() noexcept { return registry().mutex; }

socket_id identify_socket(int fd) noexcept {
  fd_record* record = record_of(fd, true);
  return {fd, generation_in(record), record};
}

bool enter_while_open(const socket_id& socket) noexcept {
  return enter_calls(record_for(socket.fd, socket.record, false), socket.generation);
}

void leave_while_open(const socket_id& socket) noexcept {
  leave_calls(record_for(socket.fd, socket.record, false));
}

void close_socket(int fd) noexcept {
  if (fd < 0) {
    return;
  }
  io_slot* here = current_io_slot;
  if (here != nullptr) {
    here->forget(fd);  // ops this thread's reactor holds on the socket end now, before the number can be reused
  }
  if (fd_record* record = record_of(fd, false)) {
    std::uint32_t generation = record->generation.fetch_add(1, std::memory_order_seq_cst);
    while (record->calls.load(std::memory_order_seq_cst) != 0) {  // fd_records.hpp, "Calls"
      std::this_thread::yield();
    }
    std::uint32_t own = here != nullptr ? here->reactor_id() : 0;
    bool crowded = record->crowded.exchange(false, std::memory_order_acquire);  // see fd_records.hpp, "Threads"
    for (auto& slot : record->watchers) {
      std::uint32_t watcher = slot.exchange(0, std::memory_order_acquire);
      if (watcher != 0 && watcher != own && !crowded) {
        tell_watcher(watcher, fd, generation);
      }
    }
    if (crowded) {
      tell_every_reactor_but(own, fd, generation);
    }
  }
  ::close(fd);
}

}  // namespace corio::detail
