#include "worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <numeric>
#include <vector>

#include <qtl/parallel.hpp>

namespace qtl::tool {

worker_pool_result run_worker_pool(unsigned threads, worker_pool_jobs const& jobs) {
  auto const asked = static_cast<unsigned>(qtl::resolve_threads(static_cast<int>(threads)));
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < jobs.count; ++i) {
    total += jobs.bytes ? jobs.bytes(i) : 0;
  }
  std::vector<std::size_t> order(jobs.count);  // the i-th job handed out
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (jobs.file) {
    std::vector<std::vector<std::size_t>> by_file;
    for (std::size_t i = 0; i < jobs.count; ++i) {
      std::size_t const f = jobs.file(i);
      by_file.resize(std::max(by_file.size(), f + 1));
      by_file[f].push_back(i);
    }
    order.clear();
    for (std::size_t round = 0; order.size() < jobs.count; ++round) {
      for (auto const& in_file : by_file) {
        if (round < in_file.size()) {
          order.push_back(in_file[round]);
        }
      }
    }
  }
  worker_pool_result result;
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done_bytes{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::mutex progress_mu;
  auto const worker = [&]() {
    for (;;) {
      std::size_t const taken = next.fetch_add(1);
      if (taken >= jobs.count || failed.load()) {
        return;
      }
      std::size_t const i = order[taken];
      try {
        jobs.run(i);
      } catch (std::exception const& e) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!failed.exchange(true)) {
          result.first_error = (jobs.describe ? jobs.describe(i) : "job " + std::to_string(i)) + ": " + e.what();
        }
        return;
      }
      std::uint64_t const b = jobs.bytes ? jobs.bytes(i) : 0;
      std::uint64_t const d = done_bytes.fetch_add(b) + b;
      if (jobs.progress) {
        std::lock_guard<std::mutex> lock(progress_mu);
        jobs.progress(d, total);
      }
    }
  };
  // The calling thread is the first worker; a thread the system will not create leaves fewer
  // workers, not an abort.
  result.threads = static_cast<unsigned>(qtl::run_parts(static_cast<int>(asked), [&](int) { worker(); },
                                                        [&](int started, char const* why) {
                                                          if (jobs.fewer_threads) {
                                                            jobs.fewer_threads(static_cast<unsigned>(started), asked, why);
                                                          }
                                                        }));
  result.failed = failed.load();
  return result;
}

}  // namespace qtl::tool
