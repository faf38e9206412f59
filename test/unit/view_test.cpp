// qtl/view.hpp: views over caller memory, and host_tensor's cache-line-aligned storage.
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include <qtl/view.hpp>

using qtl::index_t;

TEST_CASE("make_view gives row-major extents and strides", "[view]") {
  int data[24] = {};
  auto const v2 = qtl::make_view(data, 4, 6);
  CHECK(v2.rows() == 4);
  CHECK(v2.cols() == 6);
  CHECK(v2.stride[0] == 6);
  CHECK(v2.stride[1] == 1);
  CHECK(v2.size() == 24);
  auto const v3 = qtl::make_view(data, 2, 3, 4);
  CHECK(v3.stride[0] == 12);
  CHECK(v3.stride[1] == 4);
  CHECK(v3.stride[2] == 1);
}

TEST_CASE("host_tensor storage starts on a 64-byte boundary for every size and type", "[view]") {
  // glibc returns large blocks 16 bytes past a page and small ones 16-byte aligned: both are
  // covered, as are element types of 1, 2 and 4 bytes.
  for (index_t n : {1, 3, 17, 1000, 100000, 1 << 20}) {
    qtl::host_tensor<std::uint8_t, 1> a({n});
    qtl::host_tensor<std::uint16_t, 2> b({n, 3});
    qtl::host_tensor<std::int32_t, 3> c({2, n, 1});
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % qtl::buffer_alignment == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % qtl::buffer_alignment == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(c.data()) % qtl::buffer_alignment == 0);
    CHECK(c.size() == 2 * n);
    CHECK(b.storage()[static_cast<std::size_t>(3 * n - 1)] == 0);  // value-initialised
  }
  // The allocator survives the vector operations the tool uses (move out, resize).
  qtl::host_tensor<float, 2> t({5, 7});
  auto moved = std::move(t.storage());
  moved.resize(4096);
  CHECK(reinterpret_cast<std::uintptr_t>(moved.data()) % qtl::buffer_alignment == 0);
}

TEST_CASE("host_tensor storage compares with a std::vector of the same elements", "[view]") {
  qtl::host_tensor<std::int32_t, 1> t({3});
  t.data()[0] = 1;
  t.data()[1] = -2;
  t.data()[2] = 3;
  std::vector<std::int32_t> const same{1, -2, 3};
  std::vector<std::int32_t> const other{1, -2, 4};
  std::vector<std::int32_t> const shorter{1, -2};
  CHECK(t.storage() == same);
  CHECK(same == t.storage());
  CHECK(t.storage() != other);
  CHECK(shorter != t.storage());
  CHECK(t.storage() == t.storage());
}

TEST_CASE("host_tensor rejects a negative extent", "[view]") {
  CHECK_THROWS_AS((qtl::host_tensor<float, 2>({2, -1})), qtl::shape_error);
}

TEST_CASE("views_overlap compares the byte ranges the elements occupy", "[view]") {
  std::vector<std::uint16_t> m(4 * 8);  // a [4, 8] matrix of 2-byte elements
  auto const whole = qtl::make_view(m.data(), 4, 8);
  auto const row = [&](qtl::index_t i) { return qtl::make_view(m.data() + i * 8, 8); };
  CHECK(qtl::views_overlap(whole, row(3)));
  CHECK_FALSE(qtl::views_overlap(row(0), row(1)));
  // the last element's second byte counts: a byte view of the byte just past row 0's end
  auto const* bytes = reinterpret_cast<std::uint8_t const*>(m.data());
  CHECK(qtl::views_overlap(row(0), qtl::make_view(bytes + 15, 1)));
  CHECK_FALSE(qtl::views_overlap(row(0), qtl::make_view(bytes + 16, 1)));
  // a column (stride 8) spans rows 0 to 3: it overlaps row 2 but not a view past the matrix
  qtl::view1d<std::uint16_t> col{m.data() + 1, {4}, {8}};
  CHECK(qtl::views_overlap(col, row(2)));
  // a reversed row (negative stride) covers the same bytes as the row
  qtl::view1d<std::uint16_t> reversed{m.data() + 15, {8}, {-1}};
  CHECK(qtl::views_overlap(reversed, row(1)));
  CHECK_FALSE(qtl::views_overlap(reversed, row(0)));
  CHECK_FALSE(qtl::views_overlap(reversed, row(2)));
  // empty views touch nothing
  CHECK_FALSE(qtl::views_overlap(qtl::make_view(m.data(), 0), whole));
}

TEST_CASE("column_slice keeps the strides and moves to column lo", "[view]") {
  int data[3 * 5] = {};
  auto const v = qtl::make_view(data, 3, 5);
  auto const c = qtl::column_slice(v, 1, 4);
  CHECK(c.data == data + 1);
  CHECK(c.extent[0] == 3);
  CHECK(c.extent[1] == 3);
  CHECK(c.stride[0] == 5);
  CHECK(&c(2, 2) == &v(2, 3));
  auto const empty = qtl::column_slice(qtl::make_view(static_cast<int*>(nullptr), 0, 0), 0, 0);
  CHECK(empty.data == nullptr);
  CHECK(empty.extent[1] == 0);
  static_assert(qtl::column_slice(qtl::make_view(static_cast<int*>(nullptr), 0, 4), 2, 2).extent[1] == 0);
}
