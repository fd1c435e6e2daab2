// The waiter protocol of channels and select; the design note is in
// include/corio/detail/chan_waiter.hpp.
#include <corio/detail/chan_waiter.hpp>

#include <corio/detail/coop_budget.hpp>
#include <corio/detail/random.hpp>
#include <corio/errors.hpp>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <span>
#include <stdexcept>

namespace corio::detail {

namespace {

// The distinct locks of a select's branches, held in address order for the duration of its two
// passes (a channel named by two branches is locked once).
class locks_in_order {
 public:
  locks_in_order(chan_node* const* nodes, std::size_t count) noexcept {
    if (count == 1) {  // a select of one branch: one lock, nothing to order
      locks_[count_++] = &nodes[0]->ops_->lock(nodes[0]->channel_);
      locks_[0]->lock();
      return;
    }
    for (std::size_t i = 0; i < count; ++i) {
      spin_lock* lock = &nodes[i]->ops_->lock(nodes[i]->channel_);
      if (std::find(locks_, locks_ + count_, lock) == locks_ + count_) {
        locks_[count_++] = lock;
      }
    }
    std::sort(locks_, locks_ + count_);
    for (std::size_t i = 0; i < count_; ++i) {
      locks_[i]->lock();
    }
  }
  locks_in_order(const locks_in_order&) = delete;
  locks_in_order& operator=(const locks_in_order&) = delete;
  ~locks_in_order() {
    for (std::size_t i = count_; i > 0; --i) {
      locks_[i - 1]->unlock();
    }
  }

 private:
  spin_lock* locks_[chan_waiter::max_branches];
  std::size_t count_ = 0;
};

}  // namespace

// The head is a select's node (or there is none). Later nodes may be plain ops again.
chan_node* node_list::claim_first_select(wake_batch& woken) noexcept {
  while (chan_node* node = head_) {
    remove(*node);
    if (!node->in_select_) {
      woken.push(*node->parked_);
      return node;
    }
    auto& waiter = static_cast<chan_waiter&>(*node->parked_);
    chan_waiter::claim_result claimed = waiter.claim(node->branch_);
    if (claimed == chan_waiter::claim_result::lost) {
      continue;  // its select was decided by another branch: skip it
    }
    if (claimed == chan_waiter::claim_result::claimed_parked) {
      woken.push(waiter);
    }
    return node;
  }
  return nullptr;
}

chan_waiter::claim_result chan_waiter::claim_code(std::uint32_t code) noexcept {
  std::uint32_t current = decision_.load(std::memory_order_relaxed);
  do {
    if ((current >> 1) != 0) {
      return claim_result::lost;
    }
  } while (!decision_.compare_exchange_weak(current, (code << 1) | (current & 1u), std::memory_order_acq_rel,
                                            std::memory_order_relaxed));
  return (current & 1u) != 0 ? claim_result::claimed_parked : claim_result::claimed_registering;
}

void chan_waiter::on_stop::operator()() const noexcept {
  if (self->claim_code(cancelled_code) == claim_result::claimed_parked) {
    resume_through(self->owner_, self->handle_);  // ~stop_callback in finish() waits for us
  }
}

void chan_timer::on_fire(timer& t) noexcept {
  auto& self = static_cast<chan_timer&>(t);
  chan_waiter& waiter = *self.waiter_;
  if (waiter.claim(self.branch_) == chan_waiter::claim_result::claimed_parked) {
    waiter.owner_->schedule(waiter.handle_);  // on the timer's thread: disarm() waits for us
  }
}

bool chan_waiter::suspend(std::coroutine_handle<> self, stop_state* stop) {
  handle_ = self;
  owner_ = current_owner();
  stop_ = stop;
  if (shape_.timer != nullptr && current_executor == nullptr) {
    throw std::logic_error("corio::select: a timeout branch needs an event loop or runtime on this thread");
  }
  if (stop != nullptr && stop->stop_requested()) {
    return complete_without_parking(self, cancelled_code);
  }
  std::uint32_t winner = select_shape::none;
  if (!poll_and_link(winner)) {
    return complete_without_parking(self, winner + 1);
  }
  linked_ = true;
  suspended_ = true;  // from here on, the destructor unregisters us if the frame goes
  if (stop != nullptr && stop->stop_possible()) {
    stop_callback_.emplace(*stop, on_stop{this});  // may claim at once; then `armed` below sees it
  }
  if (shape_.timer != nullptr) {
    arm_timer();
  }
  parked_ = true;  // before arming: once armed, this frame may already be running elsewhere
  std::uint32_t before = decision_.fetch_or(1u, std::memory_order_acq_rel);
  if ((before >> 1) == 0) {
    return true;  // armed: from here on a claimer may resume us: touch nothing
  }
  // Decided while registering; nobody will schedule us. Spend the budget as any completion does.
  parked_ = false;
  return yield_if_budget_spent(self);
}

// Completed (or cancelled) without parking. That spends one unit of the task's cooperative budget;
// once it is spent the task is requeued (yield_for_budget), counted as suspended meanwhile, so a
// frame destroyed there gives back a value it had received (detail/coop_budget.hpp).
bool chan_waiter::complete_without_parking(std::coroutine_handle<> self, std::uint32_t code) {
  decision_.store(code << 1, std::memory_order_relaxed);  // nothing else can see this waiter yet
  return yield_if_budget_spent(self, &suspended_);
}

// Go's two passes under every branch's lock. Returns true if the nodes were linked (park), false if
// `winner` completed now (a branch, or the default).
bool chan_waiter::poll_and_link(std::uint32_t& winner) {
  wake_batch woken;  // counterparts pass 1 claimed; woken after the locks are released
  locks_in_order locked(nodes_, count_);
  std::uint8_t order[max_branches];
  for (std::size_t i = 0; i < count_; ++i) {
    order[i] = static_cast<std::uint8_t>(i);
  }
  if (!shape_.biased) {
    shuffle(std::span(order, count_));  // the first ready branch is uniform
  }
  for (std::size_t i = 0; i < count_; ++i) {
    chan_node& node = *nodes_[order[i]];
    if (node.ops_->poll(node, woken)) {
      winner = node.branch_;
      return false;
    }
  }
  if (shape_.default_branch != select_shape::none) {
    winner = shape_.default_branch;
    return false;
  }
  for (std::size_t i = 0; i < count_; ++i) {
    nodes_[i]->ops_->link(*nodes_[i]);
  }
  return true;
}

void chan_waiter::arm_timer() {
  chan_timer& timer = *shape_.timer;
  timer.waiter_ = this;
  timer.branch_ = shape_.timeout_branch;
  try {
    timer_armed_ = true;
    timer.arm();
  } catch (...) {
    timer_armed_ = false;
    abandon();  // unregisters what is registered; nothing was won yet, or it is given back
    throw;
  }
}

void chan_waiter::unlink_nodes(std::uint32_t skip_code) noexcept {
  for (std::size_t i = 0; i < count_; ++i) {
    chan_node& node = *nodes_[i];
    if (node.branch_ + 1 == skip_code) {
      continue;
    }
    std::lock_guard guard(node.ops_->lock(node.channel_));
    node.ops_->unlink(node);
  }
}

chan_node* chan_waiter::node_of(std::uint32_t branch) const noexcept {
  for (std::size_t i = 0; i < count_; ++i) {
    if (nodes_[i]->branch_ == branch) {
      return nodes_[i];
    }
  }
  return nullptr;
}

std::uint32_t chan_waiter::finish() {
  suspended_ = false;
  stop_callback_.reset();  // waits for a stop callback in flight on another thread
  if (timer_armed_) {
    timer_armed_ = false;
    shape_.timer->disarm();  // waits for a timer callback in flight
  }
  std::uint32_t code = winner_code();
  if (linked_) {
    linked_ = false;
    // The winner's claimer scheduled us after unlocking (we synchronised with it through the
    // executor) and unlinked its node; if it claimed while we were registering, take its lock too.
    unlink_nodes(parked_ && code != cancelled_code ? code : 0);
  }
  if (in_hand_.load(std::memory_order_acquire)) {  // pairs with the release in wake_batch
    wait_until_released();
  }
  if (code == cancelled_code) {
    throw cancelled();
  }
  std::uint32_t winner = code - 1;
  if (stop_ != nullptr && stop_->stop_requested()) {
    chan_node* node = node_of(winner);
    if (node == nullptr || !node->ok_) {
      throw cancelled();  // the timer, the default branch, or a closed channel: nothing to keep
    }
    if (node->ops_->give_back != nullptr && node->ops_->give_back(*node)) {
      throw cancelled();  // the received value went back to the channel, not to waste
    }
    // A delivered send stands: it cannot be taken back; nor can a value received from a channel
    // whose end a receiver has seen since. The next suspension point sees the stop.
  }
  return winner;
}

void chan_waiter::abandon() noexcept {
  suspended_ = false;
  stop_callback_.reset();
  if (timer_armed_) {
    timer_armed_ = false;
    shape_.timer->disarm();
  }
  claim_code(cancelled_code);  // from now on no waker touches our nodes
  if (linked_) {
    linked_ = false;
    unlink_nodes(0);
  }
  if (in_hand_.load(std::memory_order_acquire)) {
    wait_until_released();  // a waker is still scheduling us: keep the frame (and executor) alive
  }
  std::uint32_t code = winner_code();
  if (code != cancelled_code) {
    chan_node* node = node_of(code - 1);
    if (node != nullptr && node->ok_ && node->ops_->give_back != nullptr) {
      node->ops_->give_back(*node);
    }
  }
}

}  // namespace corio::detail
