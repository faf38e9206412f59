// Catch2 v2's runner, compiled once into a static library shared by every unit-test executable,
// with qtl_test::skip (test/support/skip.hpp): skipped test cases are listed after the run, and a
// run in which every test case was skipped (and none failed) exits 77, Meson's "skipped".
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "skip.hpp"

namespace {

struct run_record {
  std::size_t cases_run = 0;
  std::string current;
  std::map<std::string, std::string> skipped;  // test case -> the first reason given
};

run_record& record() {
  static run_record r;
  return r;
}

struct case_counter : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    ++record().cases_run;
    record().current = info.name;
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(case_counter)

void qtl_test::skip(std::string const& why) {
  WARN("skipped: " << why);
  record().skipped.emplace(record().current, why);
}

int main(int argc, char* argv[]) {
  int const failed = Catch::Session().run(argc, argv);
  run_record const& r = record();
  for (auto const& [name, why] : r.skipped) {
    std::printf("skipped: %s: %s\n", name.c_str(), why.c_str());
  }
  if (failed == 0 && r.cases_run > 0 && r.skipped.size() == r.cases_run) {
    return 77;
  }
  return failed;
}
