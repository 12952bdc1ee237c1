// run/run_lock.h: one process writes into a run folder at a time. Two runs on one folder (a
// table started twice, a requeued Slurm task beside the one still running) would both write
// its checkpoint and its log.jsonl, each over the other's. A run therefore takes the lock
// FOLDER/.lock before it writes anything into the folder: flock(LOCK_EX | LOCK_NB) on the file,
// which stays open for the rest of the process's life. The kernel releases a flock when the
// process ends, however it ends, so a lock left by a killed run (kill -9, a crash, a lost node)
// is free at once. A second process on the folder is refused with one line naming the holder's
// pid, which the holder writes into the file.
#pragma once
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <string>
#include "layers/errors.h"  // fail()

// Locks the run folder `folder` for this process, until it exits; fails (InputError) when
// another process holds it. The file descriptor is close-on-exec: a program that the run
// started would otherwise hold the lock on after the run.
inline void lock_run_folder(const std::string& folder) {
    const std::string path = folder + "/.lock";
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail("cannot open %s: %s", path.c_str(), strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int error = errno;
        char pid[32] = {};
        const ssize_t got = pread(fd, pid, sizeof pid - 1, 0);  // empty when it has not written it yet
        close(fd);
        if (error != EWOULDBLOCK) fail("cannot lock %s: %s", path.c_str(), strerror(error));
        pid[got > 0 ? strcspn(pid, "\n") : 0] = '\0';
        fail("%s is in use by another run (pid %s): one run per folder", folder.c_str(), pid[0] ? pid : "unknown");
    }
    const std::string pid = std::to_string(getpid()) + "\n";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != (ssize_t)pid.size())
        fail("cannot write %s: %s", path.c_str(), strerror(errno));
    // fd stays open, never closed: the lock is the process's until it ends
}
