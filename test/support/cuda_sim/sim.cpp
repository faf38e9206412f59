// The simulated CUDA device (test-only, QTL_CUDA_SIM): the block scheduler, warp collectives,
// float intrinsics and the runtime API of cuda_runtime.h. See README.md.
//
// A grid runs block after block on the calling OS thread. The threads of a block are fibers, each
// on its own stack, switched by a 14-instruction x86-64 routine (glibc's swapcontext makes a
// sigprocmask system call per switch, which cost more than the kernels) and annotated for
// AddressSanitizer with __sanitizer_*_switch_fiber (which Boost.Context's fcontext is not). A
// fiber runs until it finishes or waits: at a barrier, or at a warp collective. When no fiber can
// run, the scheduler resolves what is waited on:
//
//   warp collective: complete when every lane named in the mask waits at the same site with the
//                    same mask; a named lane that exited, waits elsewhere, or does not exist is
//                    an error (real hardware: undefined behaviour or a hang);
//   barrier:         complete when every thread of the block waits at one __syncthreads site; a
//                    thread that exited or waits at another site is an error (divergent barrier).
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CUDA_SIM_ASAN 1
#else
#define CUDA_SIM_ASAN 0
#endif  // ^^^ __SANITIZE_ADDRESS__ ^^^

namespace cuda_sim {
namespace {

// ---- sm_90 limits -------------------------------------------------------------------------------
constexpr unsigned max_threads_per_block = 1024;
constexpr unsigned max_block[3] = {1024, 1024, 64};
constexpr unsigned long long max_grid[3] = {2147483647ull, 65535, 65535};
constexpr std::size_t max_dynamic_shared_default = 48 * 1024;

constexpr std::size_t stack_bytes = CUDA_SIM_ASAN ? 512 * 1024 : 128 * 1024;

enum class state : int { runnable, at_barrier, at_warp, done };

#if !defined(__x86_64__)
#error "the simulated device switches fibers with x86-64 code"
#endif  // ^^^ __x86_64__ ^^^

}  // namespace
}  // namespace cuda_sim

// cuda_sim_switch(&save_sp, next_sp): pushes the callee-saved registers, saves the stack pointer,
// switches to next_sp, pops that fiber's registers and returns into it.
extern "C" void cuda_sim_switch(void** save_sp, void* next_sp);
asm(R"(
  .text
  .globl cuda_sim_switch
  .type cuda_sim_switch, @function
cuda_sim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_sim_switch, .-cuda_sim_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");

namespace cuda_sim {
namespace {

struct sim_thread {
  void* sp = nullptr;     // saved stack pointer while switched out
  void* stack = nullptr;  // mmap'd, a guard page below
  uint3 tid{};
  int linear = 0;
  state st = state::runnable;
  std::source_location site{};
  // a pending warp collective
  warp_op op{};
  unsigned mask = 0;
  std::uint64_t value = 0;
  int arg = 0;
  int width = 32;
  std::uint64_t result = 0;
  void* fake_stack = nullptr;
};

struct block_run {
  std::vector<sim_thread>* threads = nullptr;
  int count = 0;
  uint3 bid{};
  dim3 bdim{};
  dim3 gdim{};
  void* sched_sp = nullptr;
  std::function<void()> const* body = nullptr;
  void const* sched_stack_bottom = nullptr;
  std::size_t sched_stack_size = 0;
};

thread_local block_run* g_block = nullptr;
thread_local sim_thread* g_thread = nullptr;
std::uint64_t g_epoch = 1;
bool g_ftz = false;
long long g_grid_cap = -1;  // -1: read QTL_CUDA_SIM_GRID_CAP once
thread_local cudaError_t g_last_error = cudaSuccess;

std::vector<sim_thread>& pool() {
  static std::vector<sim_thread> threads;
  return threads;
}

bool same_site(std::source_location const& a, std::source_location const& b) {
  return a.line() == b.line() && a.column() == b.column() && std::strcmp(a.file_name(), b.file_name()) == 0;
}

[[noreturn]] void fatal(std::string const& msg) {
  std::fprintf(stderr, "cuda-sim: %s\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string where(std::source_location const& s) { return std::string(s.file_name()) + ":" + std::to_string(s.line()); }

std::string thread_name(sim_thread const& t) {
  return "thread (" + std::to_string(t.tid.x) + "," + std::to_string(t.tid.y) + "," + std::to_string(t.tid.z) +
         ") of block (" + std::to_string(g_block->bid.x) + "," + std::to_string(g_block->bid.y) + "," +
         std::to_string(g_block->bid.z) + ")";
}

sim_thread& current() {
  if (g_thread == nullptr) {
    fatal("a device built-in (threadIdx, __syncthreads, a shuffle, ...) used outside a kernel");
  }
  return *g_thread;
}

// ---- fibers ---------------------------------------------------------------------------------------
[[noreturn]] void fiber_main() {
#if CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_block->sched_stack_bottom, &g_block->sched_stack_size);
#endif
  (*g_block->body)();
  g_thread->st = state::done;
#if CUDA_SIM_ASAN
  __sanitizer_start_switch_fiber(nullptr, g_block->sched_stack_bottom, g_block->sched_stack_size);
#endif
  void* unused = nullptr;
  cuda_sim_switch(&unused, g_block->sched_sp);
  __builtin_unreachable();
}

// Runs thread t until it waits or finishes.
void resume(sim_thread& t) {
  g_thread = &t;
  threadIdx = t.tid;
#if CUDA_SIM_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, static_cast<char*>(t.stack), stack_bytes);
#endif
  cuda_sim_switch(&g_block->sched_sp, t.sp);
#if CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  g_thread = nullptr;
}

// Called by a fiber: back to the scheduler until released.
void wait_here() {
  sim_thread& t = *g_thread;
  block_run* const b = g_block;
#if CUDA_SIM_ASAN
  __sanitizer_start_switch_fiber(&t.fake_stack, b->sched_stack_bottom, b->sched_stack_size);
#endif
  cuda_sim_switch(&t.sp, b->sched_sp);
#if CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(t.fake_stack, &b->sched_stack_bottom, &b->sched_stack_size);
#endif
  g_thread = &t;
  threadIdx = t.tid;
}

void* new_stack() {
  std::size_t const page = 4096;
  void* p = mmap(nullptr, stack_bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fatal("cannot map a fiber stack");
  }
  mprotect(p, page, PROT_NONE);  // overflow guard
  return static_cast<char*>(p) + page;
}

// ---- warp collectives -------------------------------------------------------------------------------
int lane_of(sim_thread const& t) { return t.linear % 32; }

// The first lane of the mask of the collective lane `first` waits at that does not wait at the same
// collective with the same mask (a lane past the block's threads counts), or -1 when every lane does.
int first_absent_lane(int first) {
  auto const& th = *g_block->threads;
  sim_thread const& a = th[static_cast<std::size_t>(first)];
  int const base = first - lane_of(a);
  for (int l = 0; l < 32; ++l) {
    if ((a.mask >> l & 1u) == 0) {
      continue;
    }
    int const i = base + l;
    if (i >= g_block->count) {
      return l;
    }
    sim_thread const& o = th[static_cast<std::size_t>(i)];
    if (o.st != state::at_warp || o.mask != a.mask || !same_site(o.site, a.site)) {
      return l;
    }
  }
  return -1;
}

// Completes the collective lane `first` waits at, if every lane of its mask waits there too.
// Returns true if it completed.
bool try_complete_warp(int first) {
  if (first_absent_lane(first) >= 0) {
    return false;
  }
  auto& th = *g_block->threads;
  sim_thread const& a = th[static_cast<std::size_t>(first)];
  int const base = first - lane_of(a);
  for (int l = 0; l < 32; ++l) {
    if ((a.mask >> l & 1u) == 0) {
      continue;
    }
    sim_thread& me = th[static_cast<std::size_t>(base + l)];
    int const w = me.width;
    if (w <= 0 || w > 32 || (w & (w - 1)) != 0) {
      fatal("warp shuffle width " + std::to_string(w) + " is not a power of two up to 32 at " + where(me.site));
    }
    int const seg = l / w * w;
    int src = l;
    switch (me.op) {
      case warp_op::shfl_idx:
        src = seg + (me.arg % w + w) % w;
        break;
      case warp_op::shfl_up:
        src = (l - seg) >= me.arg ? l - me.arg : l;
        break;
      case warp_op::shfl_down:
        src = (l - seg) + me.arg < w ? l + me.arg : l;
        break;
      case warp_op::shfl_xor:
        src = l ^ me.arg;
        src = (src / w * w == seg) ? src : l;
        break;
      case warp_op::ballot:
      case warp_op::sync:
        break;
    }
    if (me.op == warp_op::ballot) {
      std::uint64_t bits = 0;
      for (int k = 0; k < 32; ++k) {
        if ((a.mask >> k & 1u) != 0 && th[static_cast<std::size_t>(base + k)].value != 0) {
          bits |= std::uint64_t{1} << k;
        }
      }
      me.result = bits;
    } else if (me.op == warp_op::sync) {
      me.result = 0;
    } else {
      if ((a.mask >> src & 1u) == 0) {
        fatal("warp shuffle at " + where(me.site) + ": lane " + std::to_string(l) + " reads lane " +
              std::to_string(src) + ", which is not in the mask 0x" + [&] {
                char buf[16];
                std::snprintf(buf, sizeof buf, "%08x", a.mask);
                return std::string(buf);
              }());
      }
      me.result = th[static_cast<std::size_t>(base + src)].value;
    }
  }
  for (int l = 0; l < 32; ++l) {
    if ((a.mask >> l & 1u) != 0) {
      th[static_cast<std::size_t>(base + l)].st = state::runnable;
    }
  }
  return true;
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

[[noreturn]] void report_stuck_warp(int first) {
  auto const& th = *g_block->threads;
  sim_thread const& a = th[static_cast<std::size_t>(first)];
  if (int const l = first_absent_lane(first); l >= 0) {
    int const i = first - lane_of(a) + l;
    std::string const head = "warp collective at " + where(a.site) + " with mask " + hex(a.mask) + " (" +
                             thread_name(a) + "): lane " + std::to_string(l);
    if (i >= g_block->count) {
      fatal(head + " does not exist (the block has " + std::to_string(g_block->count) + " threads)");
    }
    sim_thread const& o = th[static_cast<std::size_t>(i)];
    if (o.st == state::done) {
      fatal(head + " has exited");
    }
    if (o.st == state::at_barrier) {
      fatal(head + " waits at the barrier at " + where(o.site));
    }
    if (o.st == state::at_warp) {
      fatal(head + " waits at another warp collective (" + where(o.site) + ", mask " + hex(o.mask) + ")");
    }
  }
  fatal("warp collective at " + where(a.site) + " cannot complete");
}

// ---- the block scheduler ------------------------------------------------------------------------
void run_block(block_run& b) {
  auto& th = *b.threads;
  int alive = b.count;
  ++g_epoch;
  for (int i = 0; i < b.count; ++i) {
    sim_thread& t = th[static_cast<std::size_t>(i)];
    t.st = state::runnable;
    // A fresh stack as cuda_sim_switch leaves it: six zero registers, then "return" into
    // fiber_main with the stack aligned as after a call.
#if CUDA_SIM_ASAN
    // The last fiber on this stack ended by a switch, not a return: its frames' redzones are still
    // poisoned. Kernel frames are shallow; the top 64 KiB are cleared for the next one.
    ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(t.stack) + stack_bytes - 64 * 1024, 64 * 1024);
#endif
    auto* top = reinterpret_cast<std::uintptr_t*>(static_cast<char*>(t.stack) + stack_bytes);
    top[-1] = 0;
    top[-2] = reinterpret_cast<std::uintptr_t>(&fiber_main);
    for (int r = 3; r <= 8; ++r) {
      top[-r] = 0;
    }
    t.sp = top - 8;
  }
  // Between two barriers the threads run one after another, first to last in one such round and
  // last to first in the next (alternating per block too): a missing barrier between a write and a
  // read of shared memory then makes some round read before the write, whichever thread writes.
  unsigned round = b.bid.x + b.bid.y + b.bid.z;
  while (alive > 0) {
    bool const reverse = (round++ & 1u) != 0;
    for (int k = 0; k < b.count; ++k) {
      int const i = reverse ? b.count - 1 - k : k;
      sim_thread& t = th[static_cast<std::size_t>(i)];
      if (t.st == state::runnable) {
        resume(t);
        if (t.st == state::done) {
          --alive;
        }
      }
    }
    if (alive == 0) {
      break;
    }
    // No thread can run: complete warp collectives first, then the barrier.
    bool progress = false;
    int stuck = -1;
    for (int i = 0; i < b.count; ++i) {
      if (th[static_cast<std::size_t>(i)].st == state::at_warp) {
        if (try_complete_warp(i)) {
          progress = true;
        } else if (stuck < 0) {
          stuck = i;
        }
      }
    }
    if (progress) {
      continue;
    }
    if (stuck >= 0) {
      report_stuck_warp(stuck);
    }
    sim_thread const* first = nullptr;
    for (int i = 0; i < b.count; ++i) {
      sim_thread const& t = th[static_cast<std::size_t>(i)];
      if (t.st == state::at_barrier) {
        first = &t;
        break;
      }
    }
    for (int i = 0; i < b.count; ++i) {
      sim_thread const& t = th[static_cast<std::size_t>(i)];
      if (t.st == state::done) {
        fatal("__syncthreads() at " + where(first->site) + " (" + thread_name(*first) + ") is not reached by " +
              thread_name(t) + ", which has exited: a barrier in divergent code");
      }
      if (!same_site(t.site, first->site)) {
        fatal("divergent barriers: " + thread_name(*first) + " waits at " + where(first->site) + ", " + thread_name(t) +
              " at " + where(t.site));
      }
    }
    ++g_epoch;
    for (int i = 0; i < b.count; ++i) {
      th[static_cast<std::size_t>(i)].st = state::runnable;
    }
  }
}

// ---- device memory ------------------------------------------------------------------------------
// An allocation is [front guard 256 B | the bytes asked for | back guard, >= 64 B, to a 256 B
// boundary]; the guards hold a canary that every launch checks afterwards (and ASan poisons them).
constexpr std::size_t guard_front = 256;
constexpr unsigned char canary = 0xE7;

struct allocation {
  std::size_t bytes = 0;
  std::size_t back = 0;  // back guard bytes
  bool stream_ordered = false;
};
std::map<char const*, allocation>& allocations() {
  static std::map<char const*, allocation> a;
  return a;
}

void check_guards(std::source_location site) {
  for (auto const& [p, a] : allocations()) {
#if CUDA_SIM_ASAN
    ASAN_UNPOISON_MEMORY_REGION(p - guard_front, guard_front);
    ASAN_UNPOISON_MEMORY_REGION(p + a.bytes, a.back);
#endif
    auto const bad = [](char const* g, std::size_t n) {
      for (std::size_t i = 0; i < n; ++i) {
        if (static_cast<unsigned char>(g[i]) != canary) {
          return true;
        }
      }
      return false;
    };
    bool const front = bad(p - guard_front, guard_front);
    bool const back = bad(p + a.bytes, a.back);
#if CUDA_SIM_ASAN
    ASAN_POISON_MEMORY_REGION(p - guard_front, guard_front);
    ASAN_POISON_MEMORY_REGION(p + a.bytes, a.back);
#endif
    if (front || back) {
      fatal(std::string("the kernel of ") + site.function_name() + " wrote " +
            (front ? "before the start" : "past the end") + " of a device allocation of " + std::to_string(a.bytes) +
            " bytes");
    }
  }
}

cudaError_t allocate(void** p, std::size_t bytes, bool stream_ordered) {
  if (p == nullptr) {
    return record_error(cudaErrorInvalidValue);
  }
  std::size_t const cap = (bytes + 64 + 255) / 256 * 256;
  auto* m = static_cast<char*>(std::aligned_alloc(256, guard_front + cap));
  if (m == nullptr) {
    *p = nullptr;
    return record_error(cudaErrorMemoryAllocation);
  }
  char* const user = m + guard_front;
  std::memset(m, canary, guard_front);
  std::memset(user, 0xCD, bytes);  // device memory starts as garbage, not zeros
  std::memset(user + bytes, canary, cap - bytes);
#if CUDA_SIM_ASAN
  ASAN_POISON_MEMORY_REGION(m, guard_front);
  ASAN_POISON_MEMORY_REGION(user + bytes, cap - bytes);
#endif
  allocations()[user] = {bytes, cap - bytes, stream_ordered};
  *p = user;
  return cudaSuccess;
}

cudaError_t release(void* p) {
  if (p == nullptr) {
    return cudaSuccess;
  }
  auto it = allocations().find(static_cast<char const*>(p));
  if (it == allocations().end()) {
    return record_error(cudaErrorInvalidDevicePointer);
  }
  char* const m = static_cast<char*>(p) - guard_front;
#if CUDA_SIM_ASAN
  ASAN_UNPOISON_MEMORY_REGION(m, guard_front + it->second.bytes + it->second.back);
#endif
  allocations().erase(it);
  std::free(m);
  return cudaSuccess;
}

cudaError_t copy(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) {
    return cudaSuccess;
  }
  bool const dd = is_device_range(dst, bytes);
  bool const sd = is_device_range(src, bytes);
  bool ok = dst != nullptr && src != nullptr;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      ok = ok && dd && !sd;
      break;
    case cudaMemcpyDeviceToHost:
      ok = ok && sd && !dd;
      break;
    case cudaMemcpyDeviceToDevice:
      ok = ok && sd && dd;
      break;
    case cudaMemcpyHostToHost:
      ok = ok && !sd && !dd;
      break;
    case cudaMemcpyDefault:
      break;
    default:
      return record_error(cudaErrorInvalidMemcpyDirection);
  }
  if (!ok) {
    return record_error(cudaErrorInvalidValue);
  }
  auto const* s = static_cast<char const*>(src);
  auto* d = static_cast<char*>(dst);
  if (s < d + bytes && d < s + bytes) {
    fatal("cudaMemcpy of overlapping ranges (undefined in CUDA)");
  }
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t set(void* dst, int value, std::size_t bytes) {
  if (bytes == 0) {
    return cudaSuccess;
  }
  if (!is_device_range(dst, bytes)) {
    return record_error(cudaErrorInvalidValue);
  }
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

struct sim_event {
  std::chrono::steady_clock::time_point at{};
  bool recorded = false;
};

}  // namespace

// ---- device side ----------------------------------------------------------------------------------
bool on_device() noexcept { return g_thread != nullptr; }
std::uint64_t epoch() noexcept { return g_epoch; }
int linear_thread() noexcept { return g_thread != nullptr ? g_thread->linear : -1; }
int block_threads() noexcept { return g_block != nullptr ? g_block->count : 0; }

void fail(char const* what, std::source_location site) {
  fatal(std::string(what) + " at " + where(site) + (g_thread != nullptr ? " (" + thread_name(*g_thread) + ")" : ""));
}

void barrier(std::source_location site) {
  sim_thread& t = current();
  t.st = state::at_barrier;
  t.site = site;
  wait_here();
}

std::uint64_t warp_collective(warp_op op, unsigned mask, std::uint64_t value, int arg, int width,
                              std::source_location site) {
  sim_thread& t = current();
  if ((mask >> lane_of(t) & 1u) == 0) {
    fatal("warp collective at " + where(site) + ": " + thread_name(t) + " (lane " + std::to_string(lane_of(t)) +
          ") is not in its own mask " + hex(mask));
  }
  t.st = state::at_warp;
  t.op = op;
  t.mask = mask;
  t.value = value;
  t.arg = arg;
  t.width = width;
  t.site = site;
  wait_here();
  return t.result;
}

namespace {
float canonical(float r) {
  if (r != r) {
    return __uint_as_float(0x7fffffffu);
  }
  return r;
}
float flush(float x) {
  if (g_ftz && std::fpclassify(x) == FP_SUBNORMAL) {
    return std::copysign(0.0f, x);
  }
  return x;
}
float finish(float r) { return canonical(flush(r)); }
}  // namespace

float fadd_rn(float a, float b) { return finish(flush(a) + flush(b)); }
float fsub_rn(float a, float b) { return finish(flush(a) - flush(b)); }
float fmul_rn(float a, float b) { return finish(flush(a) * flush(b)); }
float fdiv_rn(float a, float b) { return finish(flush(a) / flush(b)); }
float fmaf_rn(float a, float b, float c) { return finish(std::fma(flush(a), flush(b), flush(c))); }
float frcp_rn(float a) { return finish(1.0f / flush(a)); }
void set_flush_to_zero(bool on) { g_ftz = on; }
bool flush_to_zero() { return g_ftz; }

long long grid_cap(long long cap) {
  if (g_grid_cap < 0) {
    char const* env = std::getenv("QTL_CUDA_SIM_GRID_CAP");
    g_grid_cap = env != nullptr ? std::atoll(env) : 0;
  }
  return g_grid_cap > 0 && g_grid_cap < cap ? g_grid_cap : cap;
}
void set_grid_cap(long long cap) { g_grid_cap = cap; }

// ---- runtime --------------------------------------------------------------------------------------
cudaError_t record_error(cudaError_t e) {
  if (e != cudaSuccess) {
    g_last_error = e;
  }
  return e;
}

bool is_device_range(void const* p, std::size_t bytes) noexcept {
  auto const* c = static_cast<char const*>(p);
  auto const& a = allocations();
  auto it = a.upper_bound(c);
  if (it == a.begin()) {
    return false;
  }
  --it;
  return c >= it->first && c + bytes <= it->first + it->second.bytes && c <= it->first + it->second.bytes;
}

cudaError_t run_grid(cudaLaunchConfig_t const& config, std::function<void()> const& body, std::source_location site) {
  dim3 const g = config.gridDim;
  dim3 const bl = config.blockDim;
  unsigned long long const threads = 1ull * bl.x * bl.y * bl.z;
  bool const ok = g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= max_grid[0] && g.y <= max_grid[1] && g.z <= max_grid[2] &&
                  bl.x >= 1 && bl.y >= 1 && bl.z >= 1 && bl.x <= max_block[0] && bl.y <= max_block[1] &&
                  bl.z <= max_block[2] && threads <= max_threads_per_block &&
                  config.dynamicSmemBytes <= max_dynamic_shared_default;
  if (!ok) {
    return record_error(cudaErrorInvalidConfiguration);
  }
  if (g_thread != nullptr) {
    fatal("a kernel launched from device code (dynamic parallelism is not simulated) at " + where(site));
  }
  auto& th = pool();
  while (th.size() < threads) {
    th.emplace_back();
    th.back().stack = new_stack();
  }
  block_run b;
  b.threads = &th;
  b.count = static_cast<int>(threads);
  b.bdim = bl;
  b.gdim = g;
  b.body = &body;
  for (unsigned z = 0; z < bl.z; ++z) {
    for (unsigned y = 0; y < bl.y; ++y) {
      for (unsigned x = 0; x < bl.x; ++x) {
        sim_thread& t = th[(z * bl.y + y) * bl.x + x];
        t.tid = {x, y, z};
        t.linear = static_cast<int>((z * bl.y + y) * bl.x + x);
      }
    }
  }
  block_run* const outer = g_block;
  g_block = &b;
  blockDim = bl;
  gridDim = g;
  for (unsigned bz = 0; bz < g.z; ++bz) {
    for (unsigned by = 0; by < g.y; ++by) {
      for (unsigned bx = 0; bx < g.x; ++bx) {
        b.bid = {bx, by, bz};
        blockIdx = b.bid;
        run_block(b);
      }
    }
  }
  g_block = outer;
  check_guards(site);
  return cudaSuccess;
}

}  // namespace cuda_sim

thread_local constinit uint3 threadIdx{};
thread_local constinit uint3 blockIdx{};
thread_local constinit dim3 blockDim{};
thread_local constinit dim3 gridDim{};

using cuda_sim::record_error;

char const* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection:
      return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
char const* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }
cudaError_t cudaGetLastError() {
  cudaError_t const e = cuda_sim::g_last_error;
  cuda_sim::g_last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return cuda_sim::g_last_error; }
cudaError_t cudaGetDeviceCount(int* n) {
  if (n == nullptr) {
    return record_error(cudaErrorInvalidValue);
  }
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  if (d == nullptr) {
    return record_error(cudaErrorInvalidValue);
  }
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : record_error(cudaErrorInvalidValue); }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaMalloc(void** p, std::size_t bytes) { return cuda_sim::allocate(p, bytes, false); }
cudaError_t cudaFree(void* p) { return cuda_sim::release(p); }
cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t) { return cuda_sim::allocate(p, bytes, true); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cuda_sim::release(p); }
cudaError_t cudaMemcpy(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind) {
  return cuda_sim::copy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpyAsync(void* dst, void const* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cuda_sim::copy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) { return cuda_sim::set(dst, value, bytes); }
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t) {
  return cuda_sim::set(dst, value, bytes);
}

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  if (s == nullptr) {
    return record_error(cudaErrorInvalidValue);
  }
  *s = reinterpret_cast<cudaStream_t>(new char(0));
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete reinterpret_cast<char*>(s);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* e) {
  if (e == nullptr) {
    return record_error(cudaErrorInvalidValue);
  }
  *e = reinterpret_cast<cudaEvent_t>(new cuda_sim::sim_event);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<cuda_sim::sim_event*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  if (e == nullptr) {
    return record_error(cudaErrorInvalidResourceHandle);
  }
  auto* ev = reinterpret_cast<cuda_sim::sim_event*>(e);
  ev->at = std::chrono::steady_clock::now();
  ev->recorded = true;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  return e != nullptr ? cudaSuccess : record_error(cudaErrorInvalidResourceHandle);
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  auto* a = reinterpret_cast<cuda_sim::sim_event*>(start);
  auto* b = reinterpret_cast<cuda_sim::sim_event*>(end);
  if (ms == nullptr || a == nullptr || b == nullptr || !a->recorded || !b->recorded) {
    return record_error(cudaErrorInvalidValue);
  }
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}
