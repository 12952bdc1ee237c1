// tests/temp_dir.h: temporary folders for the tests (host only). Each test run writes its
// files into one folder of its own, made in $TMPDIR (or /tmp) and removed when the tests end,
// so that two test runs at once never read each other's files.
#pragma once
#include <stdlib.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

// A fresh folder under $TMPDIR, removed with everything in it when the object goes, by the process
// that made it only: a forked child that exits (the emulation's tests of what stops a program) must
// not take its parent's folder with it.
struct TempDir {
    std::string path;
    pid_t owner = getpid();
    TempDir() {
        const char* base = getenv("TMPDIR");
        std::string pattern = std::string(base && *base ? base : "/tmp") + "/maskprior-test-XXXXXX";
        if (!mkdtemp(&pattern[0])) throw std::runtime_error("cannot make a temporary folder " + pattern);
        path = pattern;
    }
    ~TempDir() {
        if (getpid() == owner) std::filesystem::remove_all(path);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    // writes text into a file of the folder; returns its path
    std::string write(const std::string& file, const std::string& text) const {
        std::string full = path + "/" + file;
        std::ofstream(full) << text;
        return full;
    }
};

// The test run's own folder, made on first use and removed at exit.
inline const TempDir& test_dir() {
    static TempDir dir;
    return dir;
}

// A path in the test run's folder
inline std::string tmp_path(const std::string& name) { return test_dir().path + "/" + name; }

// The start of every temporary file name the tests use: <the run's folder>/maskprior_
static const std::string TMP_PREFIX = tmp_path("maskprior_");
