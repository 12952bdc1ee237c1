// run/atomic_file.h: how every file a run leaves (checkpoints, metrics.json, log.jsonl) is
// written so that nothing is lost: the bytes go to FILE.tmp, are forced to the disk (fsync),
// and only then is FILE.tmp renamed to FILE. A rename within one folder is atomic, so a reader,
// a crash, a kill -9 or a power cut finds either the old FILE or the new one, never half of it;
// at worst a stray FILE.tmp is left behind, which the next write replaces.
//
// fault_point: a test-only hook that makes the faults exact rather than timed. With
// MASKPRIOR_KILL_AT=<point>:<n> in the environment the process kills itself with SIGKILL the
// n-th time it passes <point> (counted from 1 in this process):
//   before-rename  FILE.tmp is complete and on disk, FILE is not yet replaced
//   after-rename   FILE is replaced, nothing after it has happened
//   after-step     an optimizer step is done (main.cu), no checkpoint or log written for it
// tests/test_faults.sh kills runs at each of them and checks that --continue ends bit-exact.
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
    static const char* spec = getenv("MASKPRIOR_KILL_AT");  // "<point>:<n>", or unset
    static int passes = 0;                                  // passes of the point spec names
    if (!spec) return;
    const char* colon = strrchr(spec, ':');
    if (!colon || (size_t)(colon - spec) != strlen(point) || strncmp(spec, point, colon - spec) != 0) return;
    if (++passes == atoi(colon + 1)) raise(SIGKILL);
}

// Flushes and closes f, the open FILE.tmp (tmp), forces it to the disk, and renames it to path;
// its folder is synced too, so that the rename itself survives a power cut.
inline void commit_file(FILE* f, const std::string& tmp, const std::string& path) {
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok) fail("writing %s failed (disk full?)", tmp.c_str());
    fault_point("before-rename");
    if (rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename %s to %s", tmp.c_str(), path.c_str());
    const size_t slash = path.find_last_of('/');
    const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const int dir = open(folder.c_str(), O_RDONLY | O_DIRECTORY);
    if (dir >= 0) {  // a folder that cannot be opened for reading only loses this extra safety
        fsync(dir);
        close(dir);
    }
    fault_point("after-rename");
}

// Writes text to path through path.tmp (commit_file).
inline void write_text_file(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    FILE* f = fopen(tmp.c_str(), "wb");
    if (!f) fail("cannot write %s", tmp.c_str());
    const bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
    if (!ok) {
        fclose(f);
        fail("writing %s failed (disk full?)", tmp.c_str());
    }
    commit_file(f, tmp, path);
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
