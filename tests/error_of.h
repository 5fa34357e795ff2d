// The message a function's error carries, for tests that check what a user would read.
#pragma once
#include <stdexcept>
#include <string>

// The message of the std::runtime_error fn throws ("" if none).
template <class Fn>
std::string error_of(Fn fn) {
    try {
        fn();
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}
