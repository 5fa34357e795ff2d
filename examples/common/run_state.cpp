#include "examples/common/run_state.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "autograd/io/safetensors.h"
#include "nn/serialization.h"
#include "optim/checkpoint.h"

namespace common {

namespace json = models::json;
using autograd::io::TensorRecord;

// ---------------------------------------------------------------- the interrupt

namespace {

std::atomic<int> g_signal{0};   // the first signal's number (a lock-free atomic: safe in a handler)
struct sigaction g_old_int, g_old_term;

extern "C" void on_interrupt(int sig) {
    if (g_signal.exchange(sig) != 0) _exit(128 + sig);   // the second: at once
    const char msg[] = "\ninterrupted: finishing this step, then saving the run (interrupt again to quit at once)\n";
    (void)!::write(2, msg, sizeof msg - 1);
}

}  // namespace

InterruptWatch::InterruptWatch() {
    g_signal.store(0);
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
    json::Object resume{{"rngs", rngs}, {"counters", counters}, {"schedule_step", run.sched->current_step()},
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
    // the same model: the flags must make the model the run trained
    for (const auto& [key, value] : run.model_metadata) {
        const std::string mine = json::dump(value), theirs = f.metadata.count(key) ? f.metadata.at(key) : "(none)";
        if (mine != theirs)
            throw std::runtime_error("'" + path + "': its " + key + " is " + theirs + ", the flags make " + mine +
                                     ": resume with the flags of the run that wrote it");
    }
    const json::Value resume = models::metadata_json(f.metadata, "resume", path);
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

std::string resume_path(const std::string& save, const std::string& program) {
    if (save.empty()) return program + ".resume.safetensors";
    const std::string ext = ".safetensors";
    const bool has_ext = save.size() > ext.size() && save.compare(save.size() - ext.size(), ext.size(), ext) == 0;
    return (has_ext ? save.substr(0, save.size() - ext.size()) : save) + ".resume.safetensors";
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
    return 130;
}

}  // namespace common
