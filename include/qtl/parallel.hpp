#pragma once
/// \file
/// The one way QTL runs work on threads (host only). `run_parts` runs parts 0..n-1 on n threads,
/// the calling thread taking part 0; `for_each_slice` cuts a range into aligned slices and runs
/// them so. Every caller cuts only where its output bytes do not depend on the cut, so results do
/// not depend on the thread count; a thread the system will not create leaves its part to the
/// calling thread (never an abort), and an exception of any part reaches the caller once every
/// part has ended.
///
///   qtl::for_each_slice(rows, /*align=*/128, /*min_items=*/1024, qtl::resolve_threads(t),
///                       [&](qtl::index_t lo, qtl::index_t hi) { convert_rows(lo, hi); });

#include <exception>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <qtl/view.hpp>

namespace qtl {

/// The thread count a `threads` argument means: itself when positive, else (0 or below: "one per
/// core") std::thread::hardware_concurrency(), at least 1.
inline int resolve_threads(int threads) {
  if (threads > 0) {
    return threads;
  }
  unsigned const cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

/// Runs `f(part)` for each part in [0, parts): part 0 on the calling thread, every other on a new
/// thread. A part whose thread the system will not create runs on the calling thread after part 0;
/// `on_fewer(started, why)` is then called once, before part 0 runs, with the threads that will
/// run parts (the calling thread included) and the system's reason. Returns once every part has
/// ended, rethrowing the exception of the lowest part that threw; else the number of threads that
/// ran parts.
template <class F, class OnFewer>
int run_parts(int parts, F&& f, OnFewer&& on_fewer) {
  if (parts <= 1) {
    if (parts == 1) {
      f(0);
    }
    return 1;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(parts));
  auto const guarded = [&](int part) {
    try {
      f(part);
    } catch (...) {
      errors[static_cast<std::size_t>(part)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(parts - 1));
  std::vector<int> refused;
  std::string reason;
  for (int p = 1; p < parts; ++p) {
    try {
      pool.emplace_back(guarded, p);
    } catch (std::system_error const& e) {
      if (refused.empty()) {
        reason = e.what();
      }
      refused.push_back(p);
    }
  }
  int const started = static_cast<int>(pool.size()) + 1;
  if (!refused.empty()) {
    on_fewer(started, reason.c_str());
  }
  guarded(0);
  for (int p : refused) {
    guarded(p);
  }
  for (auto& t : pool) {
    t.join();
  }
  for (auto const& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
  return started;
}

/// As above, with no word when fewer threads start.
template <class F>
int run_parts(int parts, F&& f) {
  return run_parts(parts, f, [](int, char const*) {});
}

/// Runs `f(lo, hi)` over [0, n) cut into at most `threads` slices (`run_parts`), each starting at
/// a multiple of `align` and, but the last, at least `min_items` long; one slice runs on the
/// calling thread alone.
template <class F>
void for_each_slice(index_t n, index_t align, index_t min_items, int threads, F&& f) {
  index_t const align_ = align < 1 ? 1 : align;
  index_t const per_slice_min = min_items < align_ ? align_ : min_items;
  index_t parts = n / per_slice_min;
  parts = parts < 1 ? 1 : (parts > threads ? threads : parts);
  if (parts <= 1) {
    f(index_t{0}, n);
    return;
  }
  index_t step = (n + parts - 1) / parts;
  step = (step + align_ - 1) / align_ * align_;
  run_parts(static_cast<int>(parts), [&](int p) {
    index_t const lo = p * step;
    index_t const hi = lo + step < n ? lo + step : n;
    if (lo < hi) {
      f(lo, hi);
    }
  });
}

}  // namespace qtl
