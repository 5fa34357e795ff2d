// The doctest runner: every tests/test_*.cpp file registers its TEST_CASEs here.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
