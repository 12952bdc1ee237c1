// tests/thrown.h: what an error that a piece of code throws says (host only).
#pragma once
#include <functional>
#include <string>

// The message of the Error that f throws, or "" when it throws none. Another exception type
// escapes, and doctest reports it.
template <typename Error>
inline std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}
