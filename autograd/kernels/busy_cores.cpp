#include "autograd/kernels/busy_cores.h"

#include <chrono>

#include "autograd/kernels/threads.h"

namespace autograd::kernels {

namespace {
BusyCores g_busy_cores;
std::atomic<bool> g_watch{true};
}  // namespace

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool cores_busy() { return g_watch.load(std::memory_order_relaxed) && g_busy_cores.busy(now_ns()); }

void report_team(int64_t start_ns, const int64_t* arrive_ns, const int64_t* barrier_ns, const int64_t* finish_ns, int threads) {
    if (threads < 2 || !g_watch.load(std::memory_order_relaxed)) return;
    const int64_t end = now_ns();
    const int64_t spells = g_busy_cores.serial_spells();
    g_busy_cores.report(end, end - start_ns, team_wait_ns(arrive_ns, barrier_ns, finish_ns, threads));
    // Serial from now on for a while: the team's threads would spin idle beside the one that works
    if (g_busy_cores.serial_spells() != spells) release_idle_threads();
}

int64_t serial_spells() { return g_busy_cores.serial_spells(); }

namespace test_hooks {
void set_busy_cores_watch(bool on) { g_watch.store(on, std::memory_order_relaxed); }
bool busy_cores_watch() { return g_watch.load(std::memory_order_relaxed); }
BusyCores& busy_cores_state() { return g_busy_cores; }
}  // namespace test_hooks

}  // namespace autograd::kernels
