// The doctest runner: every tests/test_*.cpp file registers its TEST_CASEs here.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/hooks.h"

int main(int argc, char** argv) {
    // A test machine busy with other work must not send the tests of the threaded paths down the
    // serial one (busy_cores.h); the tests of that watch turn it on for themselves.
    autograd::kernels::test_hooks::set_busy_cores_watch(false);
    return doctest::Context(argc, argv).run();
}
