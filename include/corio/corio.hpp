#pragma once
// Everything in corio's public API, for users who prefer one include.
#include <corio/async_mutex.hpp>
#include <corio/condition_variable.hpp>
#include <corio/errors.hpp>
#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/generator.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/semaphore.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/wait_group.hpp>
#include <corio/when_all.hpp>
#include <corio/when_any.hpp>
#include <corio/yield.hpp>
