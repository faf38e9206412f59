// Catch2 v2's main, compiled once into a static library shared by every unit-test executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
