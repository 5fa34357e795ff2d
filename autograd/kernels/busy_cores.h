// busy_cores: a thread team only helps when its threads have cores to run on.
//
// A learner's machine is rarely idle: a browser, an editor, a compiler share its cores. A team of
// two threads then runs in lockstep with a third program: whenever one thread of the team is off
// its core, the other waits for it, at the end of each parallel region and at every barrier
// inside one, and OpenMP runtimes spin while they wait, taking the core the waited-for thread
// needs. A training step has hundreds of regions, so on 2 cores beside busy programs two threads
// ran several times slower than one (docs/15 has the measurements).
//
// So the GEMM driver times each thread team it starts (the products are most of a step's teams
// and nearly all of its time) and reports how long the team's threads waited for one another:
// from the first thread's start to the last one's, at the team's barriers inside (the longest
// any one thread waited there), and from the first thread's finish to the last one's. The teams
// are judged kWindowMs of regions at a time: when their threads waited more than kBusyShare of
// that time in two windows in a row, another program has the cores. (An idle machine's teams wait
// a small share of their time, for uneven shares and a virtual machine's hiccups; beside busy
// programs, well over half: bench/RESULTS.md has the measurements behind kBusyShare. One busy
// window alone is mostly a hiccup, a core taken away for a few milliseconds, which comes now and
// then on an idle VM; when one window decided, each such false alarm sent the kernels to one
// thread for a while.) Then for a while every kernel runs on the calling
// thread alone, as one thread would, and then teams are tried again. The while starts at
// kFirstBackoffMs and doubles with each decision, up to kMaxBackoffMs; a decision after kForgetMs
// without one starts over. Being wrong costs little either way: a false alarm on an idle machine
// runs one thread for 50 ms, a try that finds the cores still busy costs one window. Results
// never change: every kernel gives the same bits on any number of threads.
#pragma once
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

namespace autograd::kernels {

// The policy, as a value with its own clock, so that a test can drive it with made-up times.
class BusyCores {
public:
    static constexpr int64_t kWindowMs = 20;                // team time judged at once: long enough
                                                            // that one hiccup of a few ms does not decide
    static constexpr int64_t kBusyShareNum = 1, kBusyShareDen = 3;   // kBusyShare = 1/3
    static constexpr int64_t kFirstBackoffMs = 50, kMaxBackoffMs = 2000;
    static constexpr int64_t kForgetMs = 10000;             // a busy window this long ago is forgotten

    // A team's region took region_ns; its threads waited waited_ns for one another; now_ns is
    // the time at its end (any clock that only goes forward, in nanoseconds).
    void report(int64_t now_ns, int64_t region_ns, int64_t waited_ns) {
        const int64_t region = region_sum_.fetch_add(region_ns, std::memory_order_relaxed) + region_ns;
        const int64_t waited = wait_sum_.fetch_add(waited_ns, std::memory_order_relaxed) + waited_ns;
        // Judged when the window is full, or sooner when its waits alone are over the share of a
        // full window: then the answer is known, and a try on busy cores ends sooner.
        if (region < kWindowMs * 1000000 && kBusyShareDen * waited <= kBusyShareNum * kWindowMs * 1000000) return;
        region_sum_.store(0, std::memory_order_relaxed);    // (a report racing with this one may
        wait_sum_.store(0, std::memory_order_relaxed);      //  be lost: it does not matter)
        if (kBusyShareDen * waited <= kBusyShareNum * region) {   // the cores were there
            last_window_busy_.store(false, std::memory_order_relaxed);
            return;
        }
        // A busy window: the first of a run may be a hiccup; the second decides. The flag stays
        // set after a decision, so a try that finds the cores still busy decides at once.
        if (!last_window_busy_.exchange(true, std::memory_order_relaxed)) return;
        serial_spells_.fetch_add(1, std::memory_order_relaxed);
        const int64_t last = last_busy_ns_.exchange(now_ns, std::memory_order_relaxed);
        int64_t backoff = backoff_ns_.load(std::memory_order_relaxed);
        if (now_ns - last > kForgetMs * 1000000) backoff = 0;   // the first busy window in a while
        backoff = std::clamp(2 * backoff, kFirstBackoffMs * 1000000, kMaxBackoffMs * 1000000);
        backoff_ns_.store(backoff, std::memory_order_relaxed);
        serial_until_ns_.store(now_ns + backoff, std::memory_order_relaxed);
    }
    // Should kernels run on the calling thread alone at now_ns?
    bool busy(int64_t now_ns) const { return now_ns < serial_until_ns_.load(std::memory_order_relaxed); }
    int64_t backoff_ns() const { return backoff_ns_.load(std::memory_order_relaxed); }
    // How many times kernels were sent to one thread since the start (or reset): a benchmark
    // reports it, since its 2-thread times are then partly 1-thread ones.
    int64_t serial_spells() const { return serial_spells_.load(std::memory_order_relaxed); }
    void reset() {
        serial_until_ns_.store(0, std::memory_order_relaxed);
        backoff_ns_.store(0, std::memory_order_relaxed);
        last_busy_ns_.store(INT64_MIN / 2, std::memory_order_relaxed);
        region_sum_.store(0, std::memory_order_relaxed);
        wait_sum_.store(0, std::memory_order_relaxed);
        last_window_busy_.store(false, std::memory_order_relaxed);
        serial_spells_.store(0, std::memory_order_relaxed);
    }

private:
    std::atomic<int64_t> serial_until_ns_{0}, backoff_ns_{0}, last_busy_ns_{INT64_MIN / 2};
    std::atomic<int64_t> region_sum_{0}, wait_sum_{0};   // the window being filled
    std::atomic<bool> last_window_busy_{false};   // was the last window judged busy?
    std::atomic<int64_t> serial_spells_{0};
};

// How long the threads of a team waited for one another, from the times each one started and
// finished its share and the time each one spent in the team's barriers: the first to start
// waits for the last to start, a thread at a barrier for the last to reach it (the barriers are
// counted by the thread that waited longest in them), and the first to finish for the last.
inline int64_t team_wait_ns(const int64_t* arrive_ns, const int64_t* barrier_ns, const int64_t* finish_ns, int threads) {
    if (threads < 2) return 0;   // nobody to wait for
    int64_t first_in = arrive_ns[0], last_in = arrive_ns[0], first_out = finish_ns[0], last_out = finish_ns[0];
    int64_t at_barriers = barrier_ns[0];
    for (int t = 1; t < threads; t++) {
        first_in = std::min(first_in, arrive_ns[t]);
        last_in = std::max(last_in, arrive_ns[t]);
        at_barriers = std::max(at_barriers, barrier_ns[t]);
        first_out = std::min(first_out, finish_ns[t]);
        last_out = std::max(last_out, finish_ns[t]);
    }
    return (last_in - first_in) + at_barriers + (last_out - first_out);
}

// The process's policy, on the steady clock.
int64_t now_ns();    // steady clock, nanoseconds
bool cores_busy();   // kernels ask before they start a team
// A team started at start_ns; its threads started and finished their shares at these times and
// spent barrier_ns in its barriers.
void report_team(int64_t start_ns, const int64_t* arrive_ns, const int64_t* barrier_ns, const int64_t* finish_ns, int threads);

// How many times the kernels were sent to one thread since the process started: a benchmark
// reports it, since its 2-thread times are then partly 1-thread ones.
int64_t serial_spells();

}  // namespace autograd::kernels
