#include "worker_pool.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace qtl::tool {

worker_pool_result run_worker_pool(unsigned threads, worker_pool_jobs const& jobs) {
  unsigned const asked = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < jobs.count; ++i) {
    total += jobs.bytes ? jobs.bytes(i) : 0;
  }
  worker_pool_result result;
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done_bytes{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::mutex progress_mu;
  auto const worker = [&]() {
    for (;;) {
      std::size_t const i = next.fetch_add(1);
      if (i >= jobs.count || failed.load()) {
        return;
      }
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
  {
    // The calling thread is the first worker; a thread the system will not create leaves fewer
    // workers, not an abort.
    std::vector<std::thread> pool;
    pool.reserve(asked - 1);
    std::string problem;
    for (unsigned t = 1; t < asked; ++t) {
      try {
        pool.emplace_back(worker);
      } catch (std::system_error const& e) {
        problem = e.what();
        break;
      }
    }
    result.threads = static_cast<unsigned>(pool.size()) + 1;
    if (!problem.empty() && jobs.fewer_threads) {
      jobs.fewer_threads(result.threads, asked, problem);
    }
    worker();
    for (auto& t : pool) {
      t.join();
    }
  }
  result.failed = failed.load();
  return result;
}

}  // namespace qtl::tool
