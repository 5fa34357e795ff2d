#include "examples/common/run_state.h"

#include <signal.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "autograd/io/atomic_file.h"
#include "autograd/io/crc32c.h"
#include "autograd/io/safetensors.h"
#include "examples/common/output_files.h"
#include "nn/serialization.h"
#include "optim/checkpoint.h"

namespace common {

namespace json = models::json;
using autograd::io::TensorRecord;

// ---------------------------------------------------------------- the interrupt

namespace {

std::atomic<int> g_signal{0};            // the first signal's number (lock-free atomics: safe in a handler)
std::atomic<int64_t> g_first_at{0};      // when it came (CLOCK_MONOTONIC, ns); 0 before one
std::atomic<int64_t> g_same_within{0};   // a signal this soon after the first is the same interrupt
struct sigaction g_old_int, g_old_term;

// write(2) of a string literal: what a signal handler may print
template <size_t N>
void say(const char (&msg)[N]) { (void)!::write(2, msg, N - 1); }

int64_t monotonic_ns() {   // clock_gettime is async-signal-safe
    struct timespec ts {};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::max<int64_t>(1, static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec);
}

extern "C" void on_interrupt(int sig) {
    const int64_t now = monotonic_ns();
    int64_t none = 0;
    if (g_first_at.compare_exchange_strong(none, now)) {   // the first (also when two threads take one each)
        g_signal.store(sig);
        say("\ninterrupted: finishing this step, then saving the run (interrupt again to quit at once)\n");
        return;
    }
    // `timeout -s INT` and a terminal's Ctrl-C signal the whole process group: a program started
    // by a shell script gets the one interrupt two or three times at once. Only a later one is a second.
    if (now - g_first_at.load() < g_same_within.load()) return;
    // the second: at once, and a save in progress is abandoned whole
    if (const char* tmp = autograd::io::save_in_progress()) {
        ::unlink(tmp);
        say("\ninterrupted again: the save was abandoned and its temporary file removed (an earlier file at that path is as it was)\n");
    } else {
        say("\ninterrupted again: quitting at once\n");
    }
    _exit(128 + sig);
}

}  // namespace

InterruptWatch::InterruptWatch(double same_interrupt_within) {
    g_signal.store(0);
    g_first_at.store(0);
    g_same_within.store(static_cast<int64_t>(same_interrupt_within * 1e9));
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;   // reads and writes in progress go on
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptWatch::~InterruptWatch() {
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
}

bool InterruptWatch::requested() const { return g_signal.load() != 0; }
int InterruptWatch::signal_number() const { return g_signal.load(); }

// ---------------------------------------------------------------- saving and restoring a run

namespace {

TensorRecord f64_record(const std::string& name, const std::vector<double>& values) {
    TensorRecord r{name, "F64", {static_cast<int64_t>(values.size())}, {}};
    r.bytes.resize(values.size() * sizeof(double));
    if (!values.empty()) std::memcpy(r.bytes.data(), values.data(), r.bytes.size());
    return r;
}

std::vector<double> as_f64(const TensorRecord& r, const std::string& path) {
    if (r.dtype != "F64" || r.shape.size() != 1)
        throw std::runtime_error("'" + path + "': '" + r.name + "' should be one row of F64");
    std::vector<double> v(static_cast<size_t>(r.shape[0]));
    if (r.bytes.size() != v.size() * sizeof(double))
        throw std::runtime_error("'" + path + "': '" + r.name + "' holds " + std::to_string(r.bytes.size()) + " bytes for " +
                                 std::to_string(v.size()) + " F64 values");
    if (!v.empty()) std::memcpy(v.data(), r.bytes.data(), r.bytes.size());   // (an empty row may have no buffer at all)
    return v;
}

const TensorRecord& record(const autograd::io::SafetensorsFile& f, const std::string& name, const std::string& path) {
    const TensorRecord* r = f.find(name);
    if (!r) throw std::runtime_error("'" + path + "': the run's state has no '" + name + "'");
    return *r;
}

// Parameter values (as KeptEpochs keeps them) as records "PREFIX.i", and back.
void add_values(std::vector<TensorRecord>& out, const std::string& prefix, const ParameterValues& values) {
    for (size_t i = 0; i < values.size(); i++)
        out.push_back(autograd::io::f32_record(prefix + "." + std::to_string(i), {static_cast<int64_t>(values[i].size())},
                                               values[i].data()));
}
ParameterValues read_values(const autograd::io::SafetensorsFile& f, const std::string& prefix, size_t count, const std::string& path) {
    ParameterValues values;
    for (size_t i = 0; i < count; i++) values.push_back(autograd::io::as_f32(record(f, prefix + "." + std::to_string(i), path)));
    return values;
}

// JSON has no infinity or NaN, and a run can hold both: the best validation loss is +inf until
// the first epoch ends (so a Ctrl-C in epoch 1 saves it), and a diverged loss makes the window's
// sum NaN. They are written as null, and read back as the value null stands for.
json::Value number_or_null(double x) { return std::isfinite(x) ? json::Value(x) : json::Value(nullptr); }
double number_or(const json::Value& v, double null_means) { return v.is_null() ? null_means : v.as_number(); }

}  // namespace

// The run in the file is the run the flags describe: every entry of its identity the same as
// now. All the differences in one message, "--seed 1 -> 2, --batch 16 -> 8", so one correction
// of the command line is enough.
static void check_same_run(const json::Value& resume, const json::Object& identity, const std::string& path) {
    const json::Value* recorded = resume.find("identity");
    if (!recorded || !recorded->is_object()) {
        std::fprintf(stderr, "note: '%s' was written before a run's state recorded its data and settings: that they are the same "
                             "cannot be checked\n", path.c_str());
        return;
    }
    std::string differences;
    auto text = [](const json::Value& v) { return v.is_string() ? v.as_string() : json::dump(v); };   // cosine, not "cosine"
    auto differ = [&](const std::string& key, const std::string& old_value, const std::string& new_value) {
        differences += (differences.empty() ? "" : ", ") + key + " " + old_value + " -> " + new_value;
    };
    for (const auto& [key, value] : identity) {
        const json::Value* old_value = recorded->find(key);
        if (!old_value) differ(key, "(not recorded)", text(value));
        else if (json::dump(*old_value) != json::dump(value)) differ(key, text(*old_value), text(value));
    }
    for (const auto& [key, value] : recorded->as_object()) {
        bool known = false;
        for (const auto& entry : identity) known = known || entry.first == key;
        if (!known) differ(key, text(value), "(not given)");
    }
    if (!differences.empty())
        throw std::runtime_error("'" + path + "' is the state of another run: " + differences +
                                 ". Resume with that run's flags and files (see --help, --resume, for what may change)");
}

std::string exact(float x) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, x).ptr;   // the shortest digits that read back as x
    return std::string(text, end);
}

json::Value file_fingerprint(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot read '" + path + "': " + std::strerror(errno));
    uint32_t crc = 0;
    int64_t bytes = 0;
    std::vector<char> buffer(1 << 16);
    for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), f)) > 0; bytes += static_cast<int64_t>(n))
        crc = autograd::io::crc32c(buffer.data(), n, crc);
    std::fclose(f);
    return json::Object{{"bytes", bytes}, {"crc32c", autograd::io::crc32c_hex(crc)}};
}

std::string recorded_save(const std::string& state_path) {
    try {
        const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(state_path);
        const json::Value resume = models::metadata_json(f.metadata, "resume", state_path);
        const json::Value* save = resume.find("save");
        return save && save->is_string() ? save->as_string() : "";
    } catch (const std::exception&) {
        return "";   // not a state: restore_run says why, once the run starts
    }
}

void save_run(const RunState& run, const std::string& path) {
    std::vector<TensorRecord> records = nn::parameter_records(*run.model);
    for (TensorRecord& r : optim::state_records(*run.opt)) records.push_back(std::move(r));
    const TrainingLog::State log = run.log->state();
    records.push_back(f64_record("log.steps", log.steps));
    records.push_back(f64_record("log.losses", log.losses));
    records.push_back(f64_record("log.valid_steps", log.valid_steps));
    records.push_back(f64_record("log.valid_losses", log.valid_losses));
    json::Object rngs{{"global", models::rng_to_json(autograd::default_rng())}}, counters, kept;
    for (const auto& [name, rng] : run.rngs) rngs.push_back({name, models::rng_to_json(*rng)});
    for (const auto& [name, value] : run.counters) counters.push_back({name, *value});
    if (run.kept) {
        const KeptEpochs::State k = run.kept->state();
        add_values(records, "kept.best", k.best);
        for (size_t e = 0; e < k.last.size(); e++) add_values(records, "kept.last." + std::to_string(e), k.last[e]);
        kept = {{"best_epoch", k.best_epoch}, {"best_loss", number_or_null(k.best_loss)}, {"best_size", static_cast<int64_t>(k.best.size())},
                {"last", static_cast<int64_t>(k.last.size())}};
    }
    json::Object resume{{"identity", run.identity}, {"save", run.save.empty() ? "" : resolved_path(run.save)},
                        {"rngs", rngs}, {"counters", counters}, {"schedule_step", run.sched->current_step()},
                        {"window", json::Object{{"sum", number_or_null(log.window_sum)}, {"weight", log.window_weight},
                                                {"steps", log.window_steps}}}};
    if (run.kept) resume.push_back({"kept", kept});
    json::Object meta = run.settings;
    for (const auto& entry : run.model_metadata) meta.push_back(entry);
    meta.push_back({"resume", resume});
    nn::Metadata metadata = models::to_metadata(meta);
    for (const auto& [key, value] : optim::state_metadata(*run.opt)) metadata[key] = value;
    autograd::io::save_safetensors(path, records, metadata);
}

void restore_run(const std::string& path, RunState& run) {
    const autograd::io::SafetensorsFile f = autograd::io::load_safetensors(path);
    if (!f.metadata.count("resume"))
        throw std::runtime_error("'" + path + "' is not a run's state (it has no 'resume' metadata): --resume takes the file an " +
                                 "interrupted run wrote");
    // the same run: first the flags and files, so that a flag which also changes the model (copy_task's
    // --vocab, gpt's --bpe) is named as the flag, not as two configs
    const json::Value resume = models::metadata_json(f.metadata, "resume", path);
    check_same_run(resume, run.identity, path);
    // the same model: the flags must make the model the run trained
    for (const auto& [key, value] : run.model_metadata) {
        const std::string mine = json::dump(value), theirs = f.metadata.count(key) ? f.metadata.at(key) : "(none)";
        if (mine != theirs)
            throw std::runtime_error("'" + path + "': its " + key + " is " + theirs + ", the flags make " + mine +
                                     ": resume with the flags of the run that wrote it");
    }
    if (!f.checksummed) std::fprintf(stderr, "note: '%s' carries no checksums (written before they were recorded): damage to it cannot be detected\n", path.c_str());
    auto at = [&](const json::Value& object, const std::string& key) -> const json::Value& {
        const json::Value* v = object.find(key);
        if (!v) throw std::runtime_error("'" + path + "': metadata 'resume' has no '" + key + "'");
        return *v;
    };
    nn::load_parameters(*run.model, f, path, /*allow_unexpected=*/true);
    optim::load_state_records(*run.opt, f);
    run.sched->set_step(models::integer_from_json(at(resume, "schedule_step")));
    autograd::default_rng() = models::rng_from_json(at(at(resume, "rngs"), "global"));
    for (auto& [name, rng] : run.rngs) *rng = models::rng_from_json(at(at(resume, "rngs"), name));
    for (auto& [name, value] : run.counters) *value = models::integer_from_json(at(at(resume, "counters"), name));
    const json::Value& window = at(resume, "window");
    run.log->restore({as_f64(record(f, "log.steps", path), path), as_f64(record(f, "log.losses", path), path),
                      as_f64(record(f, "log.valid_steps", path), path), as_f64(record(f, "log.valid_losses", path), path),
                      number_or(at(window, "sum"), NAN), at(window, "weight").as_number(),
                      static_cast<int>(models::integer_from_json(at(window, "steps")))});
    if (run.kept) {
        const json::Value& k = at(resume, "kept");
        KeptEpochs::State s;
        s.best_epoch = static_cast<int>(models::integer_from_json(at(k, "best_epoch")));
        s.best_loss = number_or(at(k, "best_loss"), INFINITY);   // null: no epoch has ended yet
        s.best = read_values(f, "kept.best", static_cast<size_t>(models::integer_from_json(at(k, "best_size"))), path);
        for (int64_t e = 0; e < models::integer_from_json(at(k, "last")); e++)
            s.last.push_back(read_values(f, "kept.last." + std::to_string(e), s.best.size(), path));
        run.kept->restore(std::move(s));
    }
}

bool note_if_run_state(const autograd::io::SafetensorsFile& f, const std::string& path) {
    if (!f.metadata.count("resume")) return false;
    std::string where;   // "step 700", "epoch 3, batches_done 12"
    try {
        const json::Value resume = models::metadata_json(f.metadata, "resume", path);
        const json::Value* counters = resume.find("counters");
        if (counters && counters->is_object())
            for (const auto& [name, value] : counters->as_object()) where += (where.empty() ? "" : ", ") + name + " " + json::dump(value);
    } catch (const std::exception&) {   // unreadable: the note says less
    }
    std::fprintf(stderr, "note: '%s' is the state of a run interrupted%s, not a --save'd model: using its model as it stood then "
                         "(--resume %s goes on training it)\n", path.c_str(), where.empty() ? "" : (" after " + where).c_str(), path.c_str());
    return true;
}

std::string resume_path(const std::string& save, const std::string& program) {
    if (save.empty()) return program + ".resume.safetensors";
    const std::string ext = ".safetensors";
    const bool has_ext = save.size() > ext.size() && save.compare(save.size() - ext.size(), ext.size(), ext) == 0;
    return (has_ext ? save.substr(0, save.size() - ext.size()) : save) + ".resume.safetensors";
}

void add_training_files(RunFiles& files, const std::string& save, const std::string& resume, const std::string& program) {
    const std::string state = resume_path(save, program);
    if (!resume.empty() && resolved_path(state) == resolved_path(resume)) {
        files.own_output("the run's state (where Ctrl-C saves it)", state);   // a resumed run saves over its own state
    } else {
        files.input("--resume", resume);
        files.output("the run's state (where Ctrl-C saves it)", state,
                     "continue the interrupted run it holds with --resume " + state + ", or give --save another path");
    }
    if (!resume.empty() && !save.empty() && recorded_save(resume) == resolved_path(save)) files.own_output("--save", save);
    else files.output("--save", save);
}

void remove_finished_state(const std::string& resume, const std::string& save, const std::string& program) {
    const std::string state = resume_path(save, program);   // the run's own: where its Ctrl-C saved it
    if (resume.empty() || resolved_path(resume) != resolved_path(state)) return;
    std::error_code ec;
    if (!std::filesystem::remove(state, ec) || ec) {
        std::fprintf(stderr, "note: the run has finished, but its state %s could not be removed: %s\n", state.c_str(),
                     ec ? ec.message().c_str() : "it is gone");
        return;
    }
    std::printf("removed %s: the run it holds has finished%s\n", state.c_str(),
                save.empty() ? " (without --save, its model is not kept)" : (" (its model is in " + save + ")").c_str());
}

// A shell word: as it is when it is safe, else in single quotes.
static std::string shell_word(const std::string& s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") == std::string::npos)
        return s;
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

int save_interrupted(const RunState& run, const std::string& path, int argc, char** argv) {
    save_run(run, path);
    std::string where, command = shell_word(argv[0]);
    for (const auto& [name, value] : run.counters) where += (where.empty() ? "" : ", ") + name + " " + std::to_string(*value);
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a == "--resume" && i + 1 < argc) { i++; continue; }   // replaced by this file below
        if (a.rfind("--resume=", 0) == 0) continue;
        command += ' ';   // (piece by piece: GCC 12 warns, wrongly, on " " + string)
        command += shell_word(a);
    }
    std::fprintf(stderr, "interrupted after %s: saved the run to %s\nto continue it: %s --resume %s\n", where.c_str(), path.c_str(),
                 command.c_str(), shell_word(path).c_str());
    return 128 + g_signal.load();   // 130 after Ctrl-C, 143 after SIGTERM, as a shell reports a signal
}

}  // namespace common
