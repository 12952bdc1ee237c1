// run/atomic_file.h: how a run's whole files (checkpoints, metrics.json, pictures, and log.jsonl
// when --continue cuts it back; its rows are appended in place: run/report.cuh) are written so that
// nothing is lost: the bytes go to FILE.tmp, are forced to the disk (fsync), and only then is
// FILE.tmp renamed to FILE. A rename within one folder is atomic, so a reader, a crash, a kill -9
// or a power cut finds either the old FILE or the new one, never half of it; at worst a stray
// FILE.tmp is left behind, which the next write replaces. Every write, flush, sync, close and
// rename is checked: one that fails (a full disk: ENOSPC; a file-size limit: EFBIG; an I/O error:
// EIO) removes FILE.tmp, leaves FILE as it was, and fails with one line naming the file and the
// error.
//
// fault_point: a test-only hook that makes the faults exact rather than timed. With
// MASKPRIOR_KILL_AT=<point>:<n> in the environment the process kills itself with SIGKILL the
// n-th time it passes <point> (counted from 1 in this process), or raises the signal numbered
// MASKPRIOR_KILL_SIGNAL instead when that is set (15: SIGTERM, a stop; run/signals.h). The
// pictures do not pass the points, so that write n is the same checkpoint or metrics.json in
// every task family, whatever pictures it draws:
//   before-rename  FILE.tmp is complete and on disk, FILE is not yet replaced
//   after-rename   FILE is replaced, nothing after it has happened
//   after-step     an optimizer step is done (main.cu), no checkpoint or log written for it
// tests/test_faults.sh kills and stops runs at each of them and checks that --continue ends
// bit-exact.
#pragma once
#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include "layers/errors.h"  // fail()

inline void fault_point(const char* point) {
    static const char* spec = getenv("MASKPRIOR_KILL_AT");               // "<point>:<n>", or unset
    static const char* signal_number = getenv("MASKPRIOR_KILL_SIGNAL");  // unset: SIGKILL
    static int passes = 0;                                               // passes of the point spec names
    if (!spec) return;
    const char* colon = strrchr(spec, ':');
    if (!colon || (size_t)(colon - spec) != strlen(point) || strncmp(spec, point, colon - spec) != 0) return;
    if (++passes == atoi(colon + 1)) raise(signal_number ? atoi(signal_number) : SIGKILL);
}

// Opens tmp, the FILE.tmp of an atomic write, for writing; write_bytes fills it, commit_file ends it.
inline FILE* open_temporary(const std::string& tmp) {
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f) fail("cannot write %s: %s", tmp.c_str(), strerror(errno));
    return f;
}

// A write into f, the open FILE.tmp (tmp), failed: closes and removes it, so that a full disk
// gets its space back and no half file is left, and fails with the error. f: nullptr once closed.
[[noreturn]] inline void write_failed(FILE* f, const std::string& tmp) {
    const int error = errno;  // before fclose and remove can change it
    if (f) fclose(f);
    remove(tmp.c_str());
    fail("cannot write %s: %s", tmp.c_str(), strerror(error));
}

// Writes `bytes` bytes of data into f, the open FILE.tmp (tmp).
inline void write_bytes(FILE* f, const std::string& tmp, const void* data, size_t bytes) {
    if (fwrite(data, 1, bytes, f) != bytes) write_failed(f, tmp);
}

// Flushes and closes f, the open FILE.tmp (tmp), forces it to the disk, and renames it to path;
// its folder is synced too, so that the rename itself survives a power cut. fault_points: the
// write passes before-rename and after-rename (false for a picture).
inline void commit_file(FILE* f, const std::string& tmp, const std::string& path, bool fault_points = true) {
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) write_failed(f, tmp);
    if (fclose(f) != 0) write_failed(nullptr, tmp);
    if (fault_points) fault_point("before-rename");
    if (rename(tmp.c_str(), path.c_str()) != 0) {
        const int error = errno;
        remove(tmp.c_str());
        fail("cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), strerror(error));
    }
    const size_t slash = path.find_last_of('/');
    const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const int dir = open(folder.c_str(), O_RDONLY | O_DIRECTORY);
    if (dir >= 0) {  // a folder that cannot be opened for reading only loses this extra safety
        fsync(dir);
        close(dir);
    }
    if (fault_points) fault_point("after-rename");
}

// Writes bytes (text, or a PNG file's) to path through path.tmp (commit_file).
inline void write_file(const std::string& path, const std::string& bytes, bool fault_points = true) {
    const std::string tmp = path + ".tmp";
    FILE* f = open_temporary(tmp);
    write_bytes(f, tmp, bytes.data(), bytes.size());
    commit_file(f, tmp, path, fault_points);
}

// Fails now, with one line, if a file cannot be created at path (its folder is missing or not
// writable): the run checks every output before its first step rather than after training.
// The probe is path.tmp, the name the real write uses first; it is removed again.
inline void check_writable(const std::string& path) {
    const std::string probe = path + ".tmp";
    FILE* f = fopen(probe.c_str(), "ab");
    if (!f) fail("cannot write %s: %s", path.c_str(), strerror(errno));
    fclose(f);
    remove(probe.c_str());
}
