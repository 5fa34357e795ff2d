// copy_task's flags, each in a test that fails when the flag's effect is removed or inverted: the
// program is run as a user runs it (tests/run_example.h), on a model small enough to train in a
// fraction of a second, and what it prints is checked against a value known without the program.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/run_example.h"

namespace {

// A copy task of 16-wide, 2-head model: a step takes a few milliseconds on one thread.
std::vector<std::string> small_copy_task(std::vector<std::string> more) {
    std::vector<std::string> args = {"--d-model", "16", "--heads", "2", "--d-ff", "32", "--batch", "16", "--eval", "8"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

}  // namespace

TEST_CASE("copy_task --steps: the run trains that many steps, and more steps reach a lower loss") {
    const ExampleRun few = run_example("copy_task", small_copy_task({"--steps", "3"}));
    const ExampleRun more = run_example("copy_task", small_copy_task({"--steps", "40"}));
    REQUIRE(few.status == 0);
    REQUIRE(more.status == 0);
    CHECK(number_after(few.out, "trained ") == 3);
    CHECK(number_after(more.out, "trained ") == 40);
    CHECK(number_after(more.out, "final loss ") < number_after(few.out, "final loss "));
}
