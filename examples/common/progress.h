// Training progress for the example programs.
//
//   common::Progress progress(steps);                  // to std::cerr
//   for (int step = 1; step <= steps; step++) {
//       ...
//       progress.update(step, {{"loss", common::format_value(loss)}, {"lr", common::format_value(lr, 3)}});
//       if (step % 100 == 0) progress.log("step " + std::to_string(step) + " val loss ...");
//   }
//   progress.finish();
//
// On a terminal: one live line, redrawn in place with '\r' at most ~10 times a second:
//   [########------------]  120/600  loss 2.310  lr 0.00123  elapsed 12.3s  eta 49.2s
// Elsewhere (a pipe, a file, CI): plain lines with no control characters, printed at the
// first step, every 10% of the total, every `plain_interval` seconds, and at the last step:
//   step 120/600 (20%)  loss 2.310  lr 0.00123  elapsed 12.3s  eta 49.2s
#pragma once

#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace common {

// name -> already formatted value, shown in this order
using Fields = std::vector<std::pair<std::string, std::string>>;

// "0.25s", "12.3s", "1m05s", "2h03m". Negative or non-finite -> "?".
std::string format_duration(double seconds);

// A number with `significant` significant digits, no trailing zeros: 2.3104 -> "2.31" (3).
std::string format_value(double value, int significant = 4);

class Progress {
public:
    enum class Mode {
        Auto,    // Live if `out` is std::cerr/std::clog/std::cout on a terminal, else Plain
        Live,    // one line redrawn with '\r'
        Plain,   // periodic plain lines
    };

    // total_steps >= 1; `step` passed to update() counts completed steps, 1..total_steps.
    explicit Progress(int total_steps, std::ostream& out = std::cerr, Mode mode = Mode::Auto);
    ~Progress();   // calls finish() if it was not called
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;

    // Report that `step` steps are done. Cheap when nothing is drawn.
    void update(int step, const Fields& fields = {});

    // Print a full line (e.g. a validation result) without garbling the live line.
    void log(const std::string& line);

    // A result line for standard output: while a live line is drawn and stdout is the same
    // terminal, it goes through log() so the two don't collide; otherwise (stdout redirected to a
    // file or pipe) it is printed to stdout, where results belong and runs can be compared.
    void result(const std::string& line);

    // Show the final state and end the live line. Safe to call more than once.
    void finish();

    bool live() const { return live_; }

    // Seconds between plain lines when 10% of the total takes longer than that (default 30).
    void set_plain_interval(double seconds) { plain_interval_ = seconds; }

    // Replace the clock (seconds, any origin) so tests can control time. Restarts the timer.
    void set_clock(std::function<double()> now_seconds);

private:
    // The text of one progress line; the terminal form right-aligns the step, with or without
    // the bar, the plain form starts "step 12/600 (2%)".
    std::string render_line(bool for_terminal, bool with_bar) const;
    void draw();                                          // write it, in the current mode

    int total_;
    std::ostream& out_;
    bool live_ = false;
    int fd_ = -1;                   // the terminal's file descriptor in live mode, for its width
    std::function<double()> now_;   // seconds
    double start_ = 0;              // now_() at construction

    int step_ = 0;                  // last step passed to update()
    Fields fields_;
    bool drawn_current_ = true;     // whether the last update() has been shown
    double last_draw_time_ = -1e300;
    int last_plain_bucket_ = -1;    // which 10% of the total was printed last (plain mode)
    bool line_open_ = false;        // a live line is on screen without its newline
    bool finished_ = false;
    double plain_interval_ = 30.0;
};

}  // namespace common
