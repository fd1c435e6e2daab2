#pragma once
// Everything in corio's public API, for users who prefer one include.
#include <corio/errors.hpp>
#include <corio/event_loop.hpp>
#include <corio/generator.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>
#include <corio/when_any.hpp>
