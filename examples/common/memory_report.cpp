#include "examples/common/memory_report.h"

#include <cstdio>
#include <fstream>

#include "autograd/runtime.h"

namespace common {

namespace {

// A "VmRSS:   1234 kB" line of /proc/self/status, in bytes; 0 where there is no such file.
double proc_status_bytes(const std::string& key) {
    std::ifstream f("/proc/self/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) * 1024.0;
    return 0.0;
}

}  // namespace

std::string megabytes(double bytes) {
    char s[32];
    std::snprintf(s, sizeof s, "%.1f MB", bytes / 1048576.0);
    return s;
}

void MemoryReport::phase(const std::string& name, const std::string& details) const {
    if (!on_) return;
    const double live = static_cast<double>(autograd::tensor_bytes_live()), peak = static_cast<double>(autograd::tensor_bytes_peak());
    std::printf("memory %s: tensors %s live, %s peak | RSS %s, peak RSS %s%s%s\n", name.c_str(),
                megabytes(live).c_str(), megabytes(peak).c_str(),
                megabytes(proc_status_bytes("VmRSS")).c_str(), megabytes(proc_status_bytes("VmHWM")).c_str(),
                details.empty() ? "" : " | ", details.c_str());
    std::fflush(stdout);
    autograd::reset_peak_memory();
}

}  // namespace common
