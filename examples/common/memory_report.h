// --memory-report: how much memory a run holds at each of its phases, on standard output.
//
//   common::MemoryReport memory(o.memory_report);
//   memory.phase("data", "text 12.3 MB, ids 4.5 MB");
//   // memory data: tensors 0.0 MB live, 0.0 MB peak | RSS 61.2 MB, peak RSS 75.0 MB | text 12.3 MB, ids 4.5 MB
//
// "tensors" are the blocks of autograd's allocator (autograd/runtime.h): live now, and
// the most that was live since the last phase line. RSS and peak RSS are the process's resident
// memory now and at its most so far (Linux: /proc/self/status; elsewhere they read 0). Peak RSS
// minus the tensors' peak is everything else: the corpus, the C library's heap and its unused
// free space, the program and its libraries.
#pragma once
#include <string>

namespace common {

class MemoryReport {
public:
    explicit MemoryReport(bool on) : on_(on) {}
    // One line "memory <name>: ..." with `details` at its end; starts the next phase's tensor peak.
    void phase(const std::string& name, const std::string& details = "") const;
    bool on() const { return on_; }

private:
    bool on_;
};

// n bytes as "12.3 MB" (MB = 2^20 bytes).
std::string megabytes(double bytes);

}  // namespace common
