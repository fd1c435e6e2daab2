#pragma once
// `corio`: corio::event_loop::post. The consumer thread runs loop.run(); stop() is loop.stop(),
// called by the last functor on the loop thread.

#include <corio/event_loop.hpp>

#include <utility>

#include "../common/check.hpp"

namespace lab {

class corio_queue {
 public:
  template <class F>
  void post(F&& functor) {
    expect(loop_.post(std::forward<F>(functor)), "corio::event_loop::post refused a functor");
  }

  void run() { loop_.run(); }
  void stop() { loop_.stop(); }

 private:
  corio::event_loop loop_;
};

}  // namespace lab
