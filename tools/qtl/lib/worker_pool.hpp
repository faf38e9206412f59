#pragma once
/// \file
/// The worker pool of `qtl quantize` and `qtl convert`: jobs taken one at a time by up to N
/// threads (the calling thread the first), the first failure recorded and the rest stopped, the
/// input bytes done reported after each job, and fewer threads where the system will not create
/// them (ulimit -u, address space) instead of an abort.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace qtl::tool {

/// What `run_worker_pool` did.
struct worker_pool_result {
  unsigned threads = 1;     ///< the threads that ran jobs (the calling thread included)
  bool failed = false;      ///< a job threw: the jobs not yet taken were not run
  std::string first_error;  ///< `describe(job)` + ": " + what() of the first job that threw
};

/// The callbacks of one run.
struct worker_pool_jobs {
  std::size_t count = 0;                             ///< jobs 0 .. count-1
  std::function<void(std::size_t)> run;              ///< does job i (may throw std::exception)
  std::function<std::uint64_t(std::size_t)> bytes;   ///< the input bytes of job i (for progress)
  std::function<std::string(std::size_t)> describe;  ///< the name of job i in an error
  /// The output file job i writes (optional). When set, jobs are handed out round robin over the
  /// files, each file's jobs in their order: a file takes one `pwrite` at a time (the kernel locks
  /// its inode), so two workers writing one file wait for each other's copy into the page cache,
  /// and on different files they do not.
  std::function<std::size_t(std::size_t)> file;
  /// Called after each job, one call at a time, with the bytes of the jobs done so far and of all.
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
  /// Called once, before any job runs, when only `started` of `asked` threads could be created.
  std::function<void(unsigned started, unsigned asked, std::string const& why)> fewer_threads;
};

/// Runs every job on `threads` threads (0: one per core), each taking the next job when it is
/// done; after the first job that throws, no thread takes another. Returns after every thread
/// has joined.
worker_pool_result run_worker_pool(unsigned threads, worker_pool_jobs const& jobs);

}  // namespace qtl::tool
