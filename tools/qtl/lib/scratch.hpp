#pragma once
// A worker thread's reusable output buffers (internal to the commands library).

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>

namespace qtl::tool {

/// n uninitialised T from this thread's buffer number `Slot` of T: grown when a job needs more,
/// never zeroed or shrunk, freed when the thread ends. A writer's output slices are written whole
/// before they are read, so the zero fill of a fresh `std::vector` per job (and the page faults of
/// its fresh pages) is work the job does not need. Two buffers of one T alive at once need two
/// slots; the span is valid until the thread's next call with the same T and Slot.
template <class T, int Slot = 0>
std::span<T> thread_scratch(std::size_t n) {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_default_constructible_v<T>);
  thread_local std::unique_ptr<T[]> buffer;
  thread_local std::size_t capacity = 0;
  if (n > capacity) {
    buffer.reset();  // the old buffer first: peak memory one buffer, not two
    buffer = std::make_unique_for_overwrite<T[]>(n);
    capacity = n;
  }
  return {buffer.get(), n};
}

}  // namespace qtl::tool
