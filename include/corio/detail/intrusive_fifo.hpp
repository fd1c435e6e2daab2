#pragma once
// A singly linked FIFO of nodes that live elsewhere (in awaiters, in suspended frames): the list of
// accepts or receives waiting on a listener's or a socket's stash (accept_stash.hpp,
// datagram_stash.hpp). No allocation and no locking: its owner guards it. A node has `Node* next`
// and `bool listed`, which the list keeps up to date; removal walks from the front, fine for the
// handful of waiters one socket has.
#include <utility>

namespace corio::detail {

template <class Node>
class intrusive_fifo {
 public:
  bool empty() const noexcept { return first_ == nullptr; }
  Node* front() const noexcept { return first_; }

  void push_back(Node& node) noexcept {
    node.next = nullptr;
    node.listed = true;
    (last_ != nullptr ? last_->next : first_) = &node;
    last_ = &node;
  }

  /// `node` must be listed here.
  void remove(Node& node) noexcept {
    Node* before = nullptr;
    Node* at = first_;
    while (at != &node) {
      before = std::exchange(at, at->next);
    }
    (before != nullptr ? before->next : first_) = node.next;
    if (last_ == &node) {
      last_ = before;
    }
    node.listed = false;
  }

 private:
  Node* first_ = nullptr;
  Node* last_ = nullptr;
};

}  // namespace corio::detail
