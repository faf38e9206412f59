// qtl/parallel.hpp: every part runs once, on as many threads as asked; slices cover the range
// exactly, aligned, and at least min_items long; the lowest part's exception reaches the caller
// after every part has ended.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/parallel.hpp>

TEST_CASE("resolve_threads: positive as given, else one per core", "[parallel]") {
  CHECK(qtl::resolve_threads(3) == 3);
  int const cores = qtl::resolve_threads(0);
  CHECK(cores >= 1);
  CHECK(qtl::resolve_threads(-1) == cores);
}

TEST_CASE("run_parts runs each part once, part 0 on the calling thread", "[parallel]") {
  for (int const parts : {0, 1, 2, 5}) {
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(parts));
    std::mutex mu;
    std::set<std::thread::id> ids;
    std::thread::id part0;
    int const started = qtl::run_parts(parts, [&](int p) {
      ++runs[static_cast<std::size_t>(p)];
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
      if (p == 0) {
        part0 = std::this_thread::get_id();
      }
    });
    CHECK(started == (parts < 1 ? 1 : parts));  // this machine creates the threads asked
    for (auto const& r : runs) {
      CHECK(r == 1);
    }
    if (parts > 0) {
      CHECK(part0 == std::this_thread::get_id());
      CHECK(ids.size() == static_cast<std::size_t>(parts));
    }
  }
}

TEST_CASE("run_parts rethrows the lowest part's exception once every part has ended", "[parallel]") {
  std::atomic<int> ended{0};
  auto const work = [&](int p) {
    ++ended;
    if (p == 2 || p == 3) {
      throw std::runtime_error("part " + std::to_string(p));
    }
  };
  CHECK_THROWS_WITH(qtl::run_parts(4, work), "part 2");
  CHECK(ended == 4);
}

TEST_CASE("for_each_slice covers [0, n) once, aligned, long enough", "[parallel]") {
  for (auto const& [n, align, min_items, threads] :
       {std::tuple<qtl::index_t, qtl::index_t, qtl::index_t, int>{0, 1, 1, 4},
        {1, 1, 1, 4},
        {1000, 128, 256, 3},
        {1000, 128, 256, 100},
        {1000, 1, 1, 7},
        {100, 16, 1000, 8},
        {4096, 128, 0, 2}}) {
    std::mutex mu;
    std::vector<std::pair<qtl::index_t, qtl::index_t>> slices;
    qtl::for_each_slice(n, align, min_items, threads, [&](qtl::index_t lo, qtl::index_t hi) {
      std::lock_guard<std::mutex> lock(mu);
      slices.emplace_back(lo, hi);
    });
    std::sort(slices.begin(), slices.end());
    INFO("n " << n << " align " << align << " min_items " << min_items << " threads " << threads);
    CHECK(slices.size() <= static_cast<std::size_t>(threads));
    qtl::index_t at = 0;
    for (std::size_t i = 0; i < slices.size(); ++i) {
      auto const [lo, hi] = slices[i];
      CHECK(lo == at);
      CHECK(lo % align == 0);
      CHECK((hi - lo >= min_items || i + 1 == slices.size()));
      at = hi;
    }
    CHECK(at == n);
  }
}
