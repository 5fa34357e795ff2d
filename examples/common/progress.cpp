#include "examples/common/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "autograd/io/utf8.h"

namespace common {

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    char buf[32];
    if (seconds < 10) {
        std::snprintf(buf, sizeof(buf), "%.2fs", seconds);
    } else if (seconds < 59.95) {   // 59.96 would round to "60.0s"
        std::snprintf(buf, sizeof(buf), "%.1fs", seconds);
    } else if (seconds < 3600) {
        const long s = std::lround(seconds);
        std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
    } else {
        const long m = std::lround(seconds / 60);
        std::snprintf(buf, sizeof(buf), "%ldh%02ldm", m / 60, m % 60);
    }
    return buf;
}

std::string format_value(double value, int significant) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*g", std::max(1, significant), value);
    return buf;
}

namespace {

double steady_seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The file descriptor behind one of the standard streams, or -1.
int standard_fd(const std::ostream& out) {
    if (&out == &std::cout) return STDOUT_FILENO;
    if (&out == &std::cerr || &out == &std::clog) return STDERR_FILENO;
    return -1;
}

int terminal_columns(int fd) {
    winsize ws{};
    if (fd >= 0 && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}


}  // namespace

Progress::Progress(int total_steps, std::ostream& out, Mode mode)
    : total_(total_steps), out_(out), now_(steady_seconds) {
    if (total_steps < 1) throw std::invalid_argument("Progress: total_steps must be >= 1");
    if (mode == Mode::Auto) {
        const int fd = standard_fd(out);
        const char* term = std::getenv("TERM");
        const bool dumb = term && std::strcmp(term, "dumb") == 0;
        live_ = fd >= 0 && isatty(fd) && !dumb;
        if (live_) fd_ = fd;
    } else {
        live_ = mode == Mode::Live;
        if (live_) fd_ = standard_fd(out);
    }
    start_ = now_();
}

Progress::~Progress() {
    try {
        finish();
    } catch (...) {
        // never throw from a destructor
    }
}

void Progress::set_clock(std::function<double()> now_seconds) {
    now_ = std::move(now_seconds);
    start_ = now_();
    last_draw_time_ = -1e300;
}

void Progress::update(int step, const Fields& fields) {
    step_ = step;
    fields_ = fields;
    drawn_current_ = false;
    const double now = now_();
    const bool last = step >= total_;
    bool due;
    if (live_) {
        due = last || now - last_draw_time_ >= 0.1;   // ~10 redraws a second
    } else {
        const int bucket = static_cast<int>(10LL * std::clamp(step, 0, total_) / total_);
        due = last || bucket > last_plain_bucket_ || now - last_draw_time_ >= plain_interval_;
    }
    if (due) draw();
}

void Progress::log(const std::string& line) {
    if (live_ && line_open_) out_ << "\r\x1b[K";   // erase the live line, print, redraw below
    out_ << line << "\n";
    line_open_ = false;
    if (live_ && step_ > 0 && !finished_) draw();
    else out_.flush();
}

void Progress::finish() {
    if (finished_) return;
    finished_ = true;
    if (step_ > 0 && !drawn_current_) draw();
    if (line_open_) out_ << "\n";
    line_open_ = false;
    out_.flush();
}

void Progress::draw() {
    last_draw_time_ = now_();
    drawn_current_ = true;
    if (live_) {
        // '\r' back to column 0, the line cut to the terminal's width (a wrapped line could not
        // be redrawn in place), then ESC[K erases what a longer previous line left behind.
        // A narrow terminal loses the bar first, then the end of the line.
        const auto fit = static_cast<size_t>(std::max(terminal_columns(fd_) - 1, 0));   // code points
        std::string line = render_line(true, true);
        if (autograd::io::first_code_points(line, fit) != line) line = render_line(true, false);
        out_ << '\r' << autograd::io::first_code_points(line, fit) << "\x1b[K";
        line_open_ = true;
    } else {
        last_plain_bucket_ = static_cast<int>(10LL * std::clamp(step_, 0, total_) / total_);
        out_ << render_line(false, false) << '\n';
    }
    out_.flush();
}

std::string Progress::render_line(bool for_terminal, bool with_bar) const {
    const int done = std::clamp(step_, 0, total_);
    const double fraction = static_cast<double>(done) / total_;
    const std::string total_text = std::to_string(total_);
    std::string step_text = std::to_string(step_);

    std::string line;
    if (for_terminal) {
        if (with_bar) {
            const int bar = 20;
            const int filled = static_cast<int>(fraction * bar);
            // appended piece by piece: GCC 12 misreports "[" + std::string(...) under -Wrestrict
            line += '[';
            line.append(static_cast<size_t>(filled), '#');
            line.append(static_cast<size_t>(bar - filled), '-');
            line += "]  ";
        }
        // right-align the step so the line does not jitter as the count grows
        if (step_text.size() < total_text.size())
            step_text.insert(0, total_text.size() - step_text.size(), ' ');
        line += step_text + "/" + total_text;
        if (!with_bar) line += " (" + std::to_string(static_cast<int>(fraction * 100)) + "%)";
    } else {
        line = "step " + step_text + "/" + total_text + " (" +
               std::to_string(static_cast<int>(fraction * 100)) + "%)";
    }
    for (const auto& [name, value] : fields_) line += "  " + name + " " + value;

    // elapsed, and the time left at the mean step time so far
    const double elapsed = now_() - start_;
    line += "  elapsed " + format_duration(elapsed);
    if (done > 0 && done < total_) line += "  eta " + format_duration(elapsed / done * (total_ - done));
    return line;
}

void Progress::result(const std::string& line) {
    if (live_ && isatty(STDOUT_FILENO)) {
        log(line);
    } else {
        std::cout << line << '\n' << std::flush;
    }
}

}  // namespace common
