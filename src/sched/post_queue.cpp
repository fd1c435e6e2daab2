// The lock-free cross-thread post queue; the design note is in include/corio/detail/post_queue.hpp.
#include <corio/detail/parker.hpp>
#include <corio/detail/post_queue.hpp>

#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace corio::detail {
namespace {

std::atomic<std::uint64_t> next_queue_id{1};

long membarrier(int command) noexcept { return ::syscall(SYS_membarrier, command, 0, 0); }

// Once per process, before the first queue exists (so before any push can read the answer). A seccomp
// filter or an old kernel that refuses leaves both sides on seq_cst operations.
bool register_membarrier() noexcept {
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  return supported >= 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
         membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

// settle()'s side of the handshake: a full barrier on every thread now running this process's code.
// membarrier can still fail after its registration (a seccomp filter installed since); then taking
// write access away from a page this thread just wrote does the same, since the kernel must
// interrupt every CPU that may hold the page's mapping, which is every CPU running one of the
// process's threads (the fallback userspace RCU and folly use too).
void process_wide_barrier() noexcept {
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
    return;
  }
  static std::mutex page_mutex;
  static void* const page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  std::lock_guard lock(page_mutex);
  if (page != MAP_FAILED) {
    *static_cast<volatile char*>(page) = 1;
    ::mprotect(page, 4096, PROT_READ);
    ::mprotect(page, 4096, PROT_READ | PROT_WRITE);
  }
}

// Set when this thread's producer_channels is destroyed: a thread_local destructed after it that posts
// gets a one-off channel instead of reading the destroyed list.
thread_local constinit bool channels_torn_down = false;

// Every channel this thread produces into. Its destructor (thread exit) drops the thread's references.
struct producer_channels {
  std::vector<post_channel*> channels;

  ~producer_channels() {
    channels_torn_down = true;
    last_channel = {0, nullptr};
    for (post_channel* channel : channels) {
      channel->release();
    }
  }

  post_channel* find(std::uint64_t queue_id) {
    std::erase_if(channels, [](post_channel* channel) {
      if (channel->owner_gone()) {
        channel->release();
        return true;
      }
      return false;
    });
    for (post_channel* channel : channels) {
      if (channel->queue_id() == queue_id) {
        return channel;
      }
    }
    return nullptr;
  }
};

thread_local producer_channels this_thread_channels;

}  // namespace

thread_local constinit last_channel_cache last_channel{0, nullptr};

bool membarrier_registered() noexcept {
  static const bool registered = register_membarrier();
  return registered;
}

void throw_nested_post() {
  throw std::logic_error("corio::event_loop::post: called from the copy or move of a functor being posted to the "
                         "same loop");
}

// ---------------------------------------------------------------- post_channel

post_channel::post_channel(std::uint64_t queue_id, std::shared_ptr<parker> consumer)
    : consumer_(std::move(consumer)),
      producer_segment_(new post_segment), consumer_segment_(producer_segment_), queue_id_(queue_id) {}

post_channel::~post_channel() {
  discard();
  for (post_segment* list : {consumer_segment_, recycled_.load(std::memory_order_acquire), producer_free_}) {
    while (list != nullptr) {
      post_segment* next = list->next;
      delete list;
      list = next;
    }
  }
}

unsigned char* post_channel::claim(std::size_t record_bytes) {
  if (producer_offset_ + record_bytes > post_segment::bytes) {
    if (producer_offset_ + sizeof(post_record) <= post_segment::bytes) {
      ::new (producer_segment_->data + producer_offset_) post_record{nullptr};
    }
    post_segment* fresh = take_free_segment();
    fresh->next = nullptr;
    producer_segment_->next = fresh;
    producer_segment_ = fresh;
    producer_offset_ = 0;
  }
  unsigned char* record = producer_segment_->data + producer_offset_;
  producer_offset_ += record_bytes;
  return record;
}

// Consumes the next published record: runs it if `run`, destroys it either way. A throwing functor
// is still consumed: the operation reports the record's size before it runs, and the offset moves on
// as the exception leaves.
void post_channel::consume_one(bool run) {
  if (consumer_offset_ + sizeof(post_record) > post_segment::bytes ||
      reinterpret_cast<post_record*>(consumer_segment_->data + consumer_offset_)->op == nullptr) {
    post_segment* finished = consumer_segment_;
    consumer_segment_ = finished->next;
    consumer_offset_ = 0;
    recycle(finished);
  }
  unsigned char* record = consumer_segment_->data + consumer_offset_;
  ++head_;
  struct advance_on_exit {
    std::size_t& offset;
    std::size_t bytes = 0;
    ~advance_on_exit() { offset += bytes; }
  } advance{consumer_offset_};
  reinterpret_cast<post_record*>(record)->op(record + sizeof(post_record), run, advance.bytes);
}

std::size_t post_channel::drain(std::size_t budget) {
  std::uint64_t available = tail_.load(std::memory_order_acquire) - head_;
  std::size_t count = available < budget ? static_cast<std::size_t>(available) : budget;
  for (std::size_t i = 0; i < count; ++i) {
    consume_one(true);
  }
  return count;
}

void post_channel::discard() noexcept {
  std::uint64_t tail = tail_.load(std::memory_order_acquire);
  while (head_ != tail) {
    consume_one(false);
  }
}

post_segment* post_channel::take_free_segment() {
  if (producer_free_ == nullptr) {
    producer_free_ = recycled_.exchange(nullptr, std::memory_order_acquire);
  }
  if (producer_free_ == nullptr) {
    return new post_segment;
  }
  post_segment* segment = producer_free_;
  producer_free_ = segment->next;
  free_segments_.fetch_sub(1, std::memory_order_relaxed);
  return segment;
}

void post_channel::recycle(post_segment* segment) noexcept {
  if (free_segments_.load(std::memory_order_relaxed) >= max_free_segments) {
    delete segment;
    return;
  }
  free_segments_.fetch_add(1, std::memory_order_relaxed);
  post_segment* head = recycled_.load(std::memory_order_relaxed);
  do {
    segment->next = head;
  } while (!recycled_.compare_exchange_weak(head, segment, std::memory_order_release, std::memory_order_relaxed));
}

void post_channel::release() noexcept {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete this;
  }
}

// ---------------------------------------------------------------- post_queue

post_queue::post_queue(std::shared_ptr<parker> consumer_parker)
    : consumer_parker_(std::move(consumer_parker)),
      id_(next_queue_id.fetch_add(1, std::memory_order_relaxed)),
      asymmetric_(membarrier_registered()) {}

post_queue::~post_queue() {
  close();
  discard();
  post_channel* channel = channels_;
  while (channel != nullptr) {
    post_channel* next = channel->next_;
    channel->mark_queue_gone();
    channel->release();
    channel = next;
  }
}

post_channel* post_queue::find_or_register_channel() {
  if (channels_torn_down) {
    return nullptr;
  }
  post_channel* channel = this_thread_channels.find(id_);
  if (channel == nullptr) {
    this_thread_channels.channels.reserve(this_thread_channels.channels.size() + 1);  // may throw: before anything changed
    channel = register_channel();
    this_thread_channels.channels.push_back(channel);
  }
  last_channel = {id_, channel};
  return channel;
}

post_channel* post_queue::register_channel() {
  auto* channel = new post_channel(id_, consumer_parker_);
  post_channel* head = incoming_.load(std::memory_order_relaxed);
  do {
    channel->next_ = head;
  } while (!incoming_.compare_exchange_weak(head, channel, std::memory_order_seq_cst, std::memory_order_relaxed));
  return channel;
}


void post_queue::discard() noexcept {
  settle();
  for (post_channel* channel = channels_; channel != nullptr; channel = channel->next_) {
    channel->discard();
  }
}

void post_queue::settle() noexcept {
  if (asymmetric_) {
    process_wide_barrier();
  }
  (void)closed();  // seq_cst, before the flags' seq_cst loads (the fallback's order; see "stopping")
  adopt_incoming();
  for (post_channel* channel = channels_; channel != nullptr; channel = channel->next_) {
    while (channel->push_in_progress()) {
      std::this_thread::yield();  // a push takes as long as copying its functor
    }
  }
}

void post_queue::adopt_incoming() noexcept {
  if (incoming_.load(std::memory_order_seq_cst) == nullptr) {  // seq_cst: settle()'s order (see "stopping")
    return;
  }
  post_channel* taken = incoming_.exchange(nullptr, std::memory_order_seq_cst);
  while (taken != nullptr) {
    post_channel* next = taken->next_;
    taken->next_ = channels_;
    channels_ = taken;
    taken = next;
  }
}

// Fairness between producers: each round first gives every channel an equal share of the budget,
// starting one channel further along the list each round, and only then lets channels with more
// queued use what the others left. So a producer that keeps thousands of records queued cannot starve
// the rest (cross-thread wake-ups of coroutines among them), and each producer's order is kept.
std::size_t post_queue::drain(std::size_t budget) {
  adopt_incoming();
  std::size_t channels = 0;
  for (post_channel* channel = channels_; channel != nullptr; channel = channel->next_) {
    ++channels;
  }
  if (channels == 0) {
    return 0;
  }
  std::size_t first = rotation_++ % channels;
  std::size_t share = budget / channels > 0 ? budget / channels : 1;
  std::size_t ran = 0;
  bool saw_idle_orphan = false;
  auto visit_rotated = [&](auto visit) {
    post_channel* start = channels_;
    for (std::size_t i = 0; i < first; ++i) {
      start = start->next_;
    }
    for (post_channel* channel = start; channel != nullptr && ran < budget; channel = channel->next_) {
      visit(*channel);
    }
    for (post_channel* channel = channels_; channel != start && ran < budget; channel = channel->next_) {
      visit(*channel);
    }
  };
  bool some_had_more = false;  // a channel used its whole share, so it may hold more
  visit_rotated([&](post_channel& channel) {
    std::size_t quota = std::min(share, budget - ran);
    std::size_t count = channel.drain(quota);
    ran += count;
    some_had_more |= count == quota;
    saw_idle_orphan |= count == 0 && channel.producer_gone();
  });
  if (some_had_more) {  // only then is a second look worth re-reading the producers' tails
    visit_rotated([&](post_channel& channel) { ran += channel.drain(budget - ran); });
  }
  if (saw_idle_orphan) {
    free_abandoned_channels();
  }
  return ran;
}

bool post_queue::has_pending() noexcept {
  if (incoming_.load(std::memory_order_seq_cst) != nullptr) {
    return true;
  }
  for (post_channel* channel = channels_; channel != nullptr; channel = channel->next_) {
    if (channel->has_pending()) {
      return true;
    }
  }
  return false;
}

void post_queue::free_abandoned_channels() noexcept {
  post_channel** link = &channels_;
  while (*link != nullptr) {
    post_channel* channel = *link;
    // producer_gone() acquires the producer's release of its reference, so its last push is visible.
    if (channel->producer_gone() && !channel->has_pending()) {
      *link = channel->next_;
      channel->release();
    } else {
      link = &channel->next_;
    }
  }
}

}  // namespace corio::detail
